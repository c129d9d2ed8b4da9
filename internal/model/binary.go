package model

import "fmt"

// Build is an etcdkeeper binary as it reports itself (`etcdkeeper
// version`): its version and the version of the etcd built into it.
type Build struct {
	Version     string `json:"version"`
	EtcdVersion string `json:"etcdVersion"`
}

func (b Build) String() string { return fmt.Sprintf("%s (etcd %s)", b.Version, b.EtcdVersion) }

// Binary is the agent's own executable: the one it runs, and the one now
// at its path when a package upgrade (or anyone) replaced that file.
type Binary struct {
	// Running is the build this agent runs.
	Running Build
	// Installed is the build at the agent's path when the file there is
	// no longer the one it runs and differs from it (nil: the same file,
	// or the same bytes).
	Installed *Build
	// InstalledErr says why the replaced file could not be read or run
	// (a copy still being written, no exec permission): no restart onto
	// it until it answers.
	InstalledErr string
	// External: the spec names an etcd binary (etcd.binary), so the
	// member's etcd does not come from this executable.
	External bool
}

// Replaced: a new build is installed at the agent's path.
func (b Binary) Replaced() bool { return b.Installed != nil }

// StartEtcdVersion is the version of the etcd a start of the member would
// run: the embedded one of the file at the agent's path (the etcd child
// is "<path> etcd ..."); "" when the spec names its own etcd binary.
func (b Binary) StartEtcdVersion() string {
	switch {
	case b.External:
		return ""
	case b.Installed != nil:
		return b.Installed.EtcdVersion
	}
	return b.Running.EtcdVersion
}

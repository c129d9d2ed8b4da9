package spec

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
)

// Version is an etcd version: major.minor.patch.
type Version struct{ Major, Minor, Patch int }

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// MinorString is "3.6": what etcd's cluster version and downgrade speak.
func (v Version) MinorString() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

// Zero: no version known.
func (v Version) Zero() bool { return v == Version{} }

// Less orders versions.
func (v Version) Less(w Version) bool {
	return slices.Compare([]int{v.Major, v.Minor, v.Patch}, []int{w.Major, w.Minor, w.Patch}) < 0
}

var versionRE = regexp.MustCompile(`^v?(\d+)\.(\d+)(?:\.(\d+))?`)

// ParseVersion reads "3.6.16", "v3.6.16", "3.6" (patch 0) and ignores a
// suffix ("3.7.0-rc.1").
func ParseVersion(s string) (Version, error) {
	m := versionRE.FindStringSubmatch(s)
	if m == nil {
		return Version{}, fmt.Errorf("%q is not an etcd version (major.minor.patch)", s)
	}
	var v Version
	v.Major, _ = strconv.Atoi(m[1])
	v.Minor, _ = strconv.Atoi(m[2])
	if m[3] != "" {
		v.Patch, _ = strconv.Atoi(m[3])
	}
	return v, nil
}

var versionLine = regexp.MustCompile(`(?m)^etcd Version: (\S+)`)

// ParseVersionOutput reads what `etcd --version` prints ("etcd Version:
// 3.6.16\nGit SHA: ...").
func ParseVersionOutput(out string) (Version, error) {
	m := versionLine.FindStringSubmatch(out)
	if m == nil {
		return Version{}, fmt.Errorf("no \"etcd Version:\" line in its --version output %q", firstLine(out))
	}
	return ParseVersion(m[1])
}

func firstLine(s string) string {
	for i, c := range s {
		if c == '\n' {
			return s[:i]
		}
	}
	return s
}

// minUpgradeTo36 is the oldest 3.5 that may be upgraded to 3.6: older
// 3.5 members panic or fail to join once a 3.6 member has raised the
// membership's storage (etcd#19557, #20870, #20967).
var minUpgradeTo36 = Version{3, 5, 26}

// removedFlags are the flags each etcd minor removed. 3.7's are the flags
// etcd 3.6.16's embed.Config.AddFlags registers and 3.7.3's does not
// (etcdmain's own are the same in both); 3.6's are the v2 store's and
// the v2 proxy's, from etcd's 3.6 changelog (3.5's modules are not in our
// cache to diff).
var removedFlags = map[string][]string{
	"3.6": {"enable-v2", "experimental-enable-v2v3", "proxy", "proxy-dial-timeout", "proxy-failure-wait",
		"proxy-read-timeout", "proxy-refresh-interval", "proxy-write-timeout"},
	"3.7": {"discovery", "discovery-proxy",
		"experimental-bootstrap-defrag-threshold-megabytes", "experimental-compact-hash-check-enabled",
		"experimental-compact-hash-check-time", "experimental-compaction-batch-limit",
		"experimental-compaction-sleep-interval", "experimental-corrupt-check-time",
		"experimental-distributed-tracing-address", "experimental-distributed-tracing-instance-id",
		"experimental-distributed-tracing-sampling-rate", "experimental-distributed-tracing-service-name",
		"experimental-downgrade-check-time", "experimental-enable-distributed-tracing",
		"experimental-enable-lease-checkpoint", "experimental-enable-lease-checkpoint-persist",
		"experimental-initial-corrupt-check", "experimental-memory-mlock",
		"experimental-peer-skip-client-san-verification", "experimental-snapshot-catchup-entries",
		"experimental-stop-grpc-service-on-defrag", "experimental-txn-mode-write-with-shared-buffer",
		"experimental-warning-apply-duration", "experimental-warning-unary-request-duration",
		"experimental-watch-progress-notify-interval"},
}

// RemovedFlag says which etcd minor up to v removed flag name (without
// dashes), or "" when v still has it.
func RemovedFlag(name string, v Version) string {
	for minor, names := range removedFlags {
		mv, _ := ParseVersion(minor)
		if !v.Less(mv) && slices.Contains(names, name) {
			return minor
		}
	}
	return ""
}

// Move is a change of etcd version as the preflight judges it.
type Move int

const (
	MoveNone      Move = iota // the same minor: a patch release, up or down
	MoveUpgrade               // one minor up
	MoveDowngrade             // one minor down, the way etcd supports it
	MoveRefused               // anything else
)

// Preflight judges a change of the members' etcd to version to, in a
// cluster whose cluster version is cluster (major.minor, what the
// members agree on) and whose members run running: etcd's rules, one
// minor at a time; every member on 3.5.26 or later before 3.6; a
// downgrade one minor down only from 3.6 on (etcd's downgrade API). It
// returns the move and, for MoveRefused, why and what to do.
func Preflight(cluster, to Version, running []Version) (Move, string) {
	switch {
	case cluster.Zero() || to.Zero():
		return MoveNone, ""
	case to.Major != cluster.Major:
		return MoveRefused, fmt.Sprintf("etcd %s is another major version than the cluster's %s: etcd upgrades one minor at a time", to, cluster.MinorString())
	case to.Minor == cluster.Minor:
		return MoveNone, ""
	case to.Minor > cluster.Minor+1:
		return MoveRefused, fmt.Sprintf("etcd %s is more than one minor ahead of the cluster version %s: etcd upgrades one minor at a time; roll to %d.%d.x first",
			to, cluster.MinorString(), cluster.Major, cluster.Minor+1)
	case to.Minor == cluster.Minor+1:
		if to.MinorString() == "3.6" {
			for _, r := range running {
				if r.MinorString() == "3.5" && r.Less(minUpgradeTo36) {
					return MoveRefused, fmt.Sprintf("etcd %s: a member runs etcd %s, below %s: upgrade every member to %s or later first (etcd#19557: older 3.5 members fail beside 3.6)",
						to, r, minUpgradeTo36, minUpgradeTo36)
				}
			}
		}
		return MoveUpgrade, ""
	case to.Minor < cluster.Minor-1:
		return MoveRefused, fmt.Sprintf("etcd %s is more than one minor below the cluster version %s: etcd downgrades one minor at a time", to, cluster.MinorString())
	case cluster.Major == 3 && cluster.Minor < 6:
		return MoveRefused, fmt.Sprintf("etcd %s is a downgrade of the cluster version %s: etcd supports downgrades only from 3.6 on (etcdctl downgrade)", to, cluster.MinorString())
	}
	return MoveDowngrade, ""
}

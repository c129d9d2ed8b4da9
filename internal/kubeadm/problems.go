package kubeadm

import (
	"strings"

	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

// Files lists the files the spec names (tls:), each once.
func (d Document) Files() []string {
	var files []string
	seen := map[string]bool{}
	for _, f := range []string{
		d.TLS.Client.CertFile, d.TLS.Client.KeyFile, d.TLS.Client.TrustedCAFile,
		d.TLS.Peer.CertFile, d.TLS.Peer.KeyFile, d.TLS.Peer.TrustedCAFile,
		d.TLS.Agent.CertFile, d.TLS.Agent.KeyFile, d.TLS.Agent.TrustedCAFile,
	} {
		if f != "" && !seen[f] {
			seen[f] = true
			files = append(files, f)
		}
	}
	return files
}

// SplitProblems sorts what spec.Parse found in an imported spec into
// problems with files this machine cannot read, and the rest. The first
// are expected: the import may run away from the control-plane hosts, or as
// a user that may not read kubeadm's keys; the agent checks the files again
// on its host. The rest are real problems in the spec.
func SplitProblems(errs spec.Errors, unreadable []string) (files, others spec.Errors) {
	for _, e := range errs {
		if namesAny(e.Msg, unreadable) {
			files = append(files, e)
		} else {
			others = append(others, e)
		}
	}
	return files, others
}

// namesAny reports whether msg quotes one of paths, the way spec errors
// quote the file they are about (cut after 80 bytes).
func namesAny(msg string, paths []string) bool {
	for _, p := range paths {
		quoted := `"` + p + `"`
		if len(p) > 80 {
			quoted = `"` + p[:80]
		}
		if strings.Contains(msg, quoted) {
			return true
		}
	}
	return false
}

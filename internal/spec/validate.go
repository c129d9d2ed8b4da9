package spec

import (
	"regexp"
	"strings"
)

// validName is what etcd and the agent accept in cluster and member names:
// both end up in paths, flags and etcd keys.
var validName = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

// maxNameLen is Kubernetes' limit for a node name (a DNS subdomain), which
// kubeadm makes the member's name; it keeps {name} within one path element
// (255 bytes).
const maxNameLen = 253

var placeholder = regexp.MustCompile(`\{[^{}]*\}`)

// checkFields checks each value on its own, as written, before defaults.
func (d *doc) checkFields(s *Spec) {
	d.checkCluster(s.Cluster)
	d.checkMemberFields(s)
	d.checkPath("etcd.dataDir", s.Etcd.DataDir)
	d.checkFlags(s)
	d.checkEtcdSHA256(s.Etcd)
	d.checkAgent(s.Agent)
	d.checkRecoveryAddr(s)
	d.checkRepair(s.Repair)
	d.checkBackup(s.Backup)
	d.checkMaintenance(s)
	d.checkSecurityFields(s)
}

func (d *doc) checkCluster(c Cluster) {
	switch {
	case d.broken["cluster"]:
	case c.Name == "":
		d.errorf(d.line("cluster.name", "cluster"), "cluster.name: missing: name the cluster, e.g. cluster: {name: prod}")
	case !validName.MatchString(c.Name):
		d.errorf(d.line("cluster.name"), "cluster.name: %s: use only letters, digits, '.', '_' and '-'", quote(c.Name))
	}
}

// checkRecoveryAddr: the recovery listener takes orders that fence
// members and force a new cluster; without the peer TLS anyone who
// reaches it gives them, so that takes the operator's explicit word.
func (d *doc) checkRecoveryAddr(s *Spec) {
	a := s.Agent
	switch {
	case a.RecoveryAddr == "" && a.RecoveryInsecure:
		d.warning(map[string]bool{}, false, "agent.recoveryInsecure", "agent.recoveryInsecure without agent.recoveryAddr: it has no effect")
	case a.RecoveryAddr == "":
	case s.TLS.Peer.CertFile != "" && s.TLS.Peer.TrustedCAFile == "":
		d.errorf(d.line("tls.peer", "tls"), "tls.peer: agent.recoveryAddr %s checks its callers against the peer CA: set tls.peer.trustedCAFile", quote(a.RecoveryAddr))
	case s.TLS.Peer.CertFile != "" && a.RecoveryInsecure:
		d.warning(map[string]bool{}, false, "agent.recoveryInsecure", "agent.recoveryInsecure is ignored: with tls.peer, agent.recoveryAddr is mutual TLS")
	case s.TLS.Peer.CertFile == "" && a.RecoveryInsecure:
		d.warning(map[string]bool{}, false, "agent.recoveryAddr", "agent.recoveryAddr %s is plain HTTP (agent.recoveryInsecure): any host that reaches it can fence members and force a new cluster; firewall it like etcd's peer port", quote(a.RecoveryAddr))
	case s.TLS.Peer.CertFile == "":
		d.errorf(d.line("agent.recoveryAddr", "agent"), "agent.recoveryAddr %s without tls.peer: any host that reaches it could fence members and force a new cluster; set tls.peer (mutual TLS with the members' peer certificates), or, on a network only the members reach, add recoveryInsecure: true next to it", quote(a.RecoveryAddr))
	}
}

func (d *doc) checkAgent(a Agent) {
	if a.Addr != "" {
		d.checkAddr("agent.addr", a.Addr)
	}
	if a.RecoveryAddr != "" {
		d.checkAddr("agent.recoveryAddr", a.RecoveryAddr)
	}
	d.checkPath("agent.stateDir", a.StateDir)
	d.checkPath("agent.backupDir", a.BackupDir)
	d.checkPositive("agent.interval", a.Interval)
	d.checkPositive("agent.learnerTimeout", a.LearnerTimeout)
	d.checkPositive("agent.stopTimeout", a.StopTimeout)
}

func (d *doc) checkAddr(path, addr string) {
	if err := checkAddr(addr); err != nil {
		d.errorf(d.line(path), "%s: %s: %v", path, quote(addr), err)
	}
}

func (d *doc) checkPositive(path string, v Duration) {
	if d.given[path] && !d.broken[path] && v.Duration <= 0 {
		d.errorf(d.line(path), "%s: %s: must be more than 0, e.g. 2s", path, v)
	}
}

func (d *doc) checkRepair(r Repair) {
	d.checkAtLeast("repair.maxPerHour", int64(r.MaxPerHour), 1, "set repair.enabled: false to turn repair off")
	d.checkAtLeast("repair.keepBackups", int64(r.KeepBackups), 1, "a repair always keeps the data it moved aside")
	d.checkAtLeast("repair.minFreeMB", r.MinFreeMB, 0, "use 0 to skip the free space check")
	if p := "repair.snapshotMaxAge"; d.given[p] && !d.broken[p] && r.SnapshotMaxAge.Duration < 0 {
		d.errorf(d.line(p), "%s: %s: must not be negative: 0 takes a fresh safety snapshot for every repair", p, r.SnapshotMaxAge)
	}
}

func (d *doc) checkAtLeast(path string, v, min int64, hint string) {
	if d.given[path] && !d.broken[path] && v < min {
		d.errorf(d.line(path), "%s: %d: must be at least %d: %s", path, v, min, hint)
	}
}

// checkPath rejects what filepath would silently misread: "~" is a shell
// feature, and a misspelt {name} would leave every member in one dir.
func (d *doc) checkPath(path, p string) {
	if p == "~" || strings.HasPrefix(p, "~/") {
		d.errorf(d.line(path), "%s: %s: ~ is not expanded: write the full path", path, quote(p))
	}
	for _, ph := range placeholder.FindAllString(p, -1) {
		if ph != "{name}" {
			d.errorf(d.line(path), "%s: %s: unknown placeholder %s: only {name} is expanded", path, quote(p), ph)
		}
	}
}

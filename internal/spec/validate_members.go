package spec

import (
	"net"
	"net/url"
	"path/filepath"
	"strings"
)

func memberPath(i int) string { return index("members", i) }

// checkMemberFields checks each member on its own, as written.
func (d *doc) checkMemberFields(s *Spec) {
	if len(s.Members) == 0 && !d.broken["members"] {
		d.errorf(d.line("members"), "members: none listed: add at least one member with name, peerURLs and clientURLs")
	}
	for i, m := range s.Members {
		p := memberPath(i)
		if d.broken[p] {
			continue
		}
		d.checkMemberName(p, m.Name)
		d.checkURLs(p, "peerURLs", m.PeerURLs, true)
		d.checkURLs(p, "clientURLs", m.ClientURLs, true)
		d.checkURLs(p, "listenPeerURLs", m.ListenPeerURLs, false)
		d.checkURLs(p, "listenClientURLs", m.ListenClientURLs, false)
		d.checkPath(p+".dataDir", m.DataDir)
		if m.AgentAddr != "" {
			d.checkAddr(p+".agentAddr", m.AgentAddr)
		}
		if m.Leader != "" && m.Leader != LeaderPrefer && m.Leader != LeaderAvoid {
			d.errorf(d.line(p+".leader"), "%s.leader: %s: use %s (move leadership to this member), %s (move it off) or leave it out", p, quote(m.Leader), LeaderPrefer, LeaderAvoid)
		}
	}
}

// The member's leader tag (Member.Leader).
const (
	LeaderPrefer = "prefer"
	LeaderAvoid  = "avoid"
)

func (d *doc) checkMemberName(p, name string) {
	switch {
	case name == "":
		d.errorf(d.line(p+".name", p), "%s: missing name: add name: with a name unique in the cluster", p)
	case !validName.MatchString(name):
		d.errorf(d.line(p+".name"), "%s.name: %s: use only letters, digits, '.', '_' and '-'", p, quote(name))
	case len(name) > maxNameLen:
		d.errorf(d.line(p+".name"), "%s.name: %s: longer than %d characters", p, quote(name), maxNameLen)
	case name == "." || name == "..":
		// {name} is expanded into paths, where these mean other dirs.
		d.errorf(d.line(p+".name"), "%s.name: %s: not a usable name: it is a path element", p, quote(name))
	}
}

// checkURLs checks one URL list. Advertised lists are required and must
// name a reachable host; listen lists are optional and must be IPs.
func (d *doc) checkURLs(member, key string, urls []string, advertised bool) {
	path := member + "." + key
	if d.broken[path] {
		return
	}
	if advertised && len(urls) == 0 {
		d.errorf(d.line(path, member), "%s: empty: list at least one URL, e.g. [http://10.0.0.1:%s]", path, examplePort(key))
	}
	for i, raw := range urls {
		p := index(path, i)
		if d.broken[p] {
			continue
		}
		if msg := urlProblem(raw, advertised); msg != "" {
			d.errorf(d.line(p, path), "%s: %s: %s", p, quote(raw), msg)
		}
	}
}

func urlProblem(raw string, advertised bool) string {
	u, err := parseURL(raw)
	if err != nil {
		return err.Error()
	}
	ip := net.ParseIP(u.Hostname())
	switch {
	case advertised && ip != nil && ip.IsUnspecified():
		return "other members cannot reach " + u.Hostname() + ": advertise an address they can reach"
	case !advertised && ip == nil:
		return "host must be an IP: etcd listens on IPs only: use an IP or 0.0.0.0"
	}
	return ""
}

func examplePort(key string) string {
	if key == "clientURLs" {
		return "2379"
	}
	return "2380"
}

// checkMembers checks what members must not share, after defaults.
func (d *doc) checkMembers(s *Spec) {
	d.checkUnique(s, "name", func(m Member) []string { return []string{m.Name} })
	d.checkUnique(s, "peerURLs", func(m Member) []string { return urlKeys(m.PeerURLs) })
	d.checkUnique(s, "clientURLs", func(m Member) []string { return urlKeys(m.ClientURLs) })
	d.checkDirs(s)
	d.checkListen(s)
}

// urlKeys maps URLs to the form they are compared in; invalid ones are
// already reported and map to "".
func urlKeys(urls []string) []string {
	keys := make([]string, len(urls))
	for i, raw := range urls {
		if u, err := parseURL(raw); err == nil {
			keys[i] = sameURL(u)
		}
	}
	return keys
}

// checkUnique reports values of key that more than one member (or one
// member twice) uses, naming who had it first.
func (d *doc) checkUnique(s *Spec, key string, values func(Member) []string) {
	type owner struct {
		member string
		line   int
	}
	first := map[string]owner{}
	for i, m := range s.Members {
		p := memberPath(i)
		if d.broken[p] {
			continue
		}
		for j, v := range values(m) {
			if v == "" {
				continue
			}
			vp := p + "." + key
			if key != "name" {
				vp = index(vp, j)
			}
			line := d.line(vp, p)
			if o, dup := first[v]; dup {
				d.errorf(line, "%s: %s: already used by member %s (line %d): each member needs its own", vp, quote(v), o.member, o.line)
				continue
			}
			first[v] = owner{member: memberLabel(m, i), line: line}
		}
	}
}

func memberLabel(m Member, i int) string {
	if m.Name != "" {
		return m.Name
	}
	return memberPath(i)
}

// checkDirs: members on one host cannot share a data, state or backup
// dir. Which members share a host is unknown, so any shared dir is an
// error; {name} in the template avoids it.
func (d *doc) checkDirs(s *Spec) {
	for i, m := range s.Members {
		d.checkNesting(memberPath(i), m)
	}
	d.checkSharedDir(s, "data dir", "etcd.dataDir", "dataDir", func(m Member) string { return m.DataDir })
	d.checkSharedDir(s, "state dir", "agent.stateDir", "", func(m Member) string { return m.StateDir })
	d.checkSharedDir(s, "backup dir", "agent.backupDir", "", func(m Member) string { return m.BackupDir })
	d.checkSharedDir(s, "snapshot dir", "backup.dir", "", func(m Member) string { return m.SnapshotDir })
}

func (d *doc) checkSharedDir(s *Spec, what, template, memberKey string, dir func(Member) string) {
	first := map[string]Member{}
	for i, m := range s.Members {
		p := memberPath(i)
		if d.broken[p] || m.Name == "" {
			continue
		}
		o, dup := first[dir(m)]
		if !dup {
			first[dir(m)] = m
			continue
		}
		owner := o.Name
		if owner == m.Name {
			continue // a repeated name, reported as such
		}
		if !SameHost(o, m) {
			continue // one path on two hosts, as kubeadm's /var/lib/etcd
		}
		line := d.line(join(p, memberKey), template, p)
		d.errorf(line, "%s: %s %s is also member %s's: put {name} in %s, e.g. %s",
			p, what, dir(m), owner, template, exampleTemplate(template))
	}
}

func exampleTemplate(template string) string {
	switch template {
	case "etcd.dataDir":
		return defaultDataDir
	case "agent.stateDir":
		return defaultStateDir
	case "backup.dir":
		return "/var/lib/etcdkeeper/{name}/backups, or leave it empty"
	}
	return "/var/lib/etcd/{name}/.etcdkeeper-backups, or leave it empty"
}

// checkNesting guards repair: it moves the data dir into the backup dir
// and prunes old entries there, so neither may contain the other; and the
// state dir holds the repair history, which must not move away with the
// data it describes.
func (d *doc) checkNesting(p string, m Member) {
	if d.broken[p] || m.Name == "" {
		return
	}
	member := filepath.Join(m.DataDir, "member")
	if within(m.BackupDir, member) || within(m.DataDir, m.BackupDir) {
		d.errorf(d.line("agent.backupDir", p), "%s: backup dir %s must be neither inside %s nor contain the data dir %s: repair moves <dataDir>/member into the backup dir",
			p, m.BackupDir, member, m.DataDir)
	}
	if within(m.SnapshotDir, member) {
		d.errorf(d.line("backup.dir", p), "%s: snapshot dir %s must not be inside %s: repair moves the member dir away",
			p, m.SnapshotDir, member)
	}
	if within(m.StateDir, member) {
		d.errorf(d.line("agent.stateDir", p), "%s: state dir %s must not be inside %s: repair moves the member dir away",
			p, m.StateDir, member)
	}
}

// within reports whether dir is root or inside it; both are clean and
// absolute after applyDefaults.
func within(dir, root string) bool {
	rel, err := filepath.Rel(root, dir)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// SameHost reports whether two members evidently run on one machine: their
// peer URLs name the same host, or both name loopback addresses (a local
// cluster like examples/). Paths and listen addresses only collide between
// members on one machine; on separate hosts the same /var/lib/etcd or
// 127.0.0.1:2379 is the norm.
func SameHost(a, b Member) bool {
	ha, hb := peerHost(a), peerHost(b)
	if ha == "" || hb == "" {
		return false
	}
	return ha == hb || (isLoopback(ha) && isLoopback(hb))
}

func peerHost(m Member) string {
	if len(m.PeerURLs) == 0 {
		return ""
	}
	u, err := url.Parse(m.PeerURLs[0])
	if err != nil {
		return ""
	}
	return u.Hostname()
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

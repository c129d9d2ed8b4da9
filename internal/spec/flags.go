package spec

import (
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// ownedFlags are etcd flags the agent derives from the spec; setting them
// in etcd.flags would contradict the spec, so each maps to what to do.
var ownedFlags = map[string]string{
	"name":                        "",
	"data-dir":                    "",
	"initial-cluster":             "",
	"initial-cluster-state":       "",
	"initial-cluster-token":       "",
	"initial-advertise-peer-urls": "",
	"advertise-client-urls":       "",
	"listen-peer-urls":            "",
	"listen-client-urls":          "",
	// Repair moves the data dir aside as a whole; a WAL elsewhere would
	// be left behind and replayed into the fresh member.
	"wal-dir": "remove it: the WAL must stay inside the data dir so that repair moves it with the data",
	// etcd ignores every command-line flag when a config file is given,
	// which would silently drop all the flags above.
	"config-file": "remove it: etcd ignores all other flags when --config-file is set",
	// TLS comes from tls:, where the files are checked and the agent finds
	// the certificates it needs to talk to etcd.
	"cert-file":             "remove it: set tls.client.certFile",
	"key-file":              "remove it: set tls.client.keyFile",
	"trusted-ca-file":       "remove it: set tls.client.trustedCAFile",
	"client-cert-auth":      "remove it: set tls.client.clientCertAuth",
	"peer-cert-file":        "remove it: set tls.peer.certFile",
	"peer-key-file":         "remove it: set tls.peer.keyFile",
	"peer-trusted-ca-file":  "remove it: set tls.peer.trustedCAFile",
	"peer-client-cert-auth": "remove it: set tls.peer.clientCertAuth",
}

var flagName = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)

// flags reads etcd.flags. Keys are stored without leading dashes, the way
// etcd's flag names are written in its docs.
func (d *doc) flags(dst *map[string]string) field {
	return func(path string, n *yaml.Node) {
		n = resolve(n)
		if isNull(n) {
			return
		}
		if n.Kind != yaml.MappingNode {
			d.wrongShape(n, path, "a mapping of flag: value")
			return
		}
		*dst = map[string]string{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			d.flag(path, n.Content[i], n.Content[i+1], *dst)
		}
	}
}

func (d *doc) flag(path string, k, v *yaml.Node, dst map[string]string) {
	k = resolve(k)
	if k == nil || k.Kind != yaml.ScalarNode {
		d.errorf(keyLine(k, v), "%s: keys must be flag names such as snapshot-count", path)
		return
	}
	name := strings.TrimLeft(k.Value, "-")
	p := join(path, name)
	if first, dup := d.lines[p]; dup {
		d.errorf(k.Line, "%s: flag set twice, first at line %d: keep one", p, first)
		return
	}
	d.lines[p] = k.Line
	val := resolve(v)
	if isNull(val) || val.Kind != yaml.ScalarNode {
		d.errorf(v.Line, "%s: needs one value, found %s: write true for a switch, \"\" for empty, and join lists with commas", p, describe(val))
		return
	}
	dst[name] = val.Value
}

func (d *doc) checkFlags(flags map[string]string) {
	names := make([]string, 0, len(flags))
	for name := range flags {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		p := join("etcd.flags", name)
		if msg := flagProblem(name); msg != "" {
			d.errorf(d.line(p), "%s: %s", p, msg)
		}
	}
}

func flagProblem(name string) string {
	if !flagName.MatchString(name) {
		return "not an etcd flag name: use lowercase letters, digits and dashes, e.g. snapshot-count"
	}
	reason, owned := ownedFlags[name]
	switch {
	case !owned:
		return ""
	case reason != "":
		return reason
	}
	return "remove it: etcdkeeper sets --" + name + " from the spec"
}

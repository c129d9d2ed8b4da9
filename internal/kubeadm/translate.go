package kubeadm

import (
	"fmt"
	"net/url"
	"sort"
	"strings"
)

// flags fills etcd.flags with the manifests' flags that etcdkeeper does not
// own, translated to what the embedded etcd accepts.
func (b *builder) flags() {
	gates := map[string]bool{}
	for name, on := range keeperGates {
		gates[name] = on
	}
	var explicitGates string
	for _, name := range b.allFlagNames() {
		if memberFlags[name] || tlsFlags[name] {
			continue
		}
		v, m, _ := b.shared(name, "etcd.flags", raw)
		switch {
		case refusedFlags[name] != "":
			b.drop(name, v, refusedFlags[name])
			b.warn("--%s=%s (%s): %s", name, v, m.label(), refusedFlags[name])
		case name == "feature-gates":
			explicitGates = v
		case gateFlags[name] != "":
			b.dropGateFlag(name, v, gates)
		case isRenamed(name):
			b.renamed(name, v, m)
		case !etcdFlags()[name]:
			b.dropUnknown(name, v)
		default:
			b.keep(NotedFlag{Flag: Flag{Name: name, Value: v}}, m)
		}
	}
	for name, on := range parseGates(explicitGates) {
		gates[name] = on
	}
	b.featureGates(explicitGates, gates)
	sort.Slice(b.doc.Flags, func(i, j int) bool { return b.doc.Flags[i].Name < b.doc.Flags[j].Name })
}

func (b *builder) drop(name, value, why string) {
	b.doc.Dropped = append(b.doc.Dropped, fmt.Sprintf("--%s=%s: %s", name, value, why))
}

// keep adds a flag, warning when its value names the host it came from:
// etcd.flags is the same on every member.
func (b *builder) keep(f NotedFlag, from Manifest) {
	if addr := hostAddress(from); addr != "" && strings.Contains(f.Value, addr) {
		b.warn("etcd.flags %s=%s names %s's own address %s, but etcd.flags is the same on every member: use an address every host has (127.0.0.1, 0.0.0.0)",
			f.Name, f.Value, from.Name(), addr)
	}
	b.doc.Flags = append(b.doc.Flags, f)
}

// hostAddress is the host of the member's peer URL: the address that is
// this host's and no other's.
func hostAddress(m Manifest) string {
	v, _ := m.Flag("initial-advertise-peer-urls")
	u, err := url.Parse(strings.Split(v, ",")[0])
	if err != nil {
		return ""
	}
	return u.Hostname()
}

func (b *builder) dropGateFlag(name, value string, gates map[string]bool) {
	gate := gateFlags[name]
	gates[gate] = isTrue(value)
	why := fmt.Sprintf("every --experimental-* flag is gone in etcd %s; this one is the feature gate %s", etcdVersion, gate)
	if keeperGates[gate] && isTrue(value) {
		why += ", which etcdkeeper turns on by default"
	} else {
		why += fmt.Sprintf(", set to %t in feature-gates", isTrue(value))
	}
	b.drop(name, value, why)
}

func isRenamed(name string) bool {
	_, ok := renamedFlag(name)
	return ok
}

func (b *builder) renamed(name, value string, from Manifest) {
	to, _ := renamedFlag(name)
	if b.anySets(to) {
		b.drop(name, value, fmt.Sprintf("every --experimental-* flag is gone in etcd %s; the manifest also sets its replacement --%s, which is kept", etcdVersion, to))
		return
	}
	b.keep(NotedFlag{Flag: Flag{Name: to, Value: value}, Note: "was --" + name}, from)
}

func (b *builder) anySets(name string) bool {
	for _, m := range b.ms {
		if _, ok := m.Flag(name); ok {
			return true
		}
	}
	return false
}

func (b *builder) dropUnknown(name, value string) {
	if strings.HasPrefix(name, "experimental-") {
		b.drop(name, value, fmt.Sprintf("every --experimental-* flag is gone in etcd %s, and this one has no known replacement", etcdVersion))
		return
	}
	b.drop(name, value, fmt.Sprintf("etcd %s has no such flag", etcdVersion))
}

// featureGates writes feature-gates only when the manifests ask for more
// or other gates than etcdkeeper's defaults: the flag replaces them.
func (b *builder) featureGates(explicit string, gates map[string]bool) {
	if formatGates(gates) == formatGates(keeperGates) {
		if explicit != "" {
			b.drop("feature-gates", explicit, "etcdkeeper turns these gates on by default")
		}
		return
	}
	b.doc.Flags = append(b.doc.Flags, NotedFlag{
		Flag: Flag{Name: "feature-gates", Value: formatGates(gates)},
		Note: "with etcdkeeper's default gates: this flag replaces them",
	})
}

package kubeadm

import (
	"fmt"
	"net/url"
	"sort"
	"strings"

	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

// flags fills etcd.flags with the manifests' flags that etcdkeeper does not
// own, translated to what the embedded etcd accepts. A flag every host sets
// to the same value goes to etcd.flags; one that differs between hosts, or
// names the host's own address, goes to the members' own flags. A flag
// that would lose data or fork the cluster fails the import.
func (b *builder) flags() error {
	gates := map[string]bool{}
	for name, on := range keeperGates {
		gates[name] = on
	}
	var explicitGates string
	for _, name := range b.allFlagNames() {
		if memberFlags[name] || tlsFlags[name] {
			continue
		}
		u := b.uniform(name)
		if why, bad := spec.DangerousFlag(name); bad {
			return fmt.Errorf("%s: --%s: %s. Remove it from the manifest (docs/kubeadm.md), then import again",
				strings.Join(u.setBy, ", "), name, why)
		}
		switch {
		case refusedFlags[name] != "":
			b.drop(name, u.value, refusedFlags[name])
			b.warn("--%s=%s (%s): %s", name, u.value, strings.Join(u.setBy, ", "), refusedFlags[name])
		case name == "feature-gates" || gateFlags[name] != "":
			if !u.same {
				return fmt.Errorf("--%s differs between hosts (%s): etcd's feature gates are set once, in etcd.flags: make it the same in every manifest, or remove it and set feature-gates in the spec by hand",
					name, strings.Join(u.setBy, ", "))
			}
			if name == "feature-gates" {
				explicitGates = u.value
			} else {
				b.dropGateFlag(name, u.value, gates)
			}
		case isRenamed(name):
			b.renamed(name, u)
		case !etcdFlags()[name]:
			b.dropUnknown(name, u.value)
		default:
			b.keep(name, name, u)
		}
	}
	for name, on := range parseGates(explicitGates) {
		gates[name] = on
	}
	b.featureGates(explicitGates, gates)
	sort.Slice(b.doc.Flags, func(i, j int) bool { return b.doc.Flags[i].Name < b.doc.Flags[j].Name })
	return nil
}

// flagUse is how the manifests set one flag.
type flagUse struct {
	// value is the first manifest's that sets it.
	value string
	// same: every manifest sets it, to value.
	same bool
	// setBy labels the manifests that set it: "cp1's manifest cp1.yaml (=v)".
	setBy []string
	// by are the manifests that set it, with their values.
	by []Manifest
}

func (b *builder) uniform(name string) flagUse {
	u := flagUse{same: true}
	for _, m := range b.ms {
		v, ok := m.Flag(name)
		if !ok {
			u.same = false
			continue
		}
		if len(u.by) == 0 {
			u.value = v
		} else if v != u.value {
			u.same = false
		}
		u.by = append(u.by, m)
		u.setBy = append(u.setBy, fmt.Sprintf("%s (=%s)", m.label(), v))
	}
	return u
}

func (b *builder) drop(name, value, why string) {
	b.doc.Dropped = append(b.doc.Dropped, fmt.Sprintf("--%s=%s: %s", name, value, why))
}

// keep adds the manifests' flag from (to when renamed, else from) to
// etcd.flags when every host sets it alike and it names no host's own
// address; else to each member whose manifest sets it.
func (b *builder) keep(from, to string, u flagUse) {
	note := ""
	if to != from {
		note = "was --" + from
	}
	own := false
	for _, m := range u.by {
		if addr := hostAddress(m); addr != "" && strings.Contains(flagValue(m, from), addr) {
			own = true
		}
	}
	if u.same && !own {
		b.doc.Flags = append(b.doc.Flags, NotedFlag{Flag: Flag{Name: to, Value: u.value}, Note: note})
		return
	}
	why := "differs between hosts"
	if own {
		why = "names its host's own address"
	}
	for _, m := range u.by {
		mb := b.member(m.Name())
		mb.Flags = append(mb.Flags, NotedFlag{Flag: Flag{Name: to, Value: flagValue(m, from)},
			Note: strings.TrimSpace(note + " --" + from + " " + why + ": this member's own.")})
		sort.Slice(mb.Flags, func(i, j int) bool { return mb.Flags[i].Name < mb.Flags[j].Name })
	}
	if without := b.membersWithout(u.by); len(without) > 0 {
		b.warn("--%s %s: it is in the flags of member %s only; %s have none: add theirs where needed",
			from, why, names(u.by), strings.Join(without, ", "))
	}
}

// member is the document's member called name.
func (b *builder) member(name string) *Member {
	for i := range b.doc.Members {
		if b.doc.Members[i].Name == name {
			return &b.doc.Members[i]
		}
	}
	panic("kubeadm: no member " + name)
}

// membersWithout names the members whose manifest is not among ms.
func (b *builder) membersWithout(ms []Manifest) []string {
	set := map[string]bool{}
	for _, m := range ms {
		set[m.Name()] = true
	}
	var out []string
	for _, mb := range b.doc.Members {
		if !set[mb.Name] {
			out = append(out, mb.Name)
		}
	}
	return out
}

func names(ms []Manifest) string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Name()
	}
	return strings.Join(out, ", ")
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

func (b *builder) renamed(name string, u flagUse) {
	to, _ := renamedFlag(name)
	if b.anySets(to) {
		b.drop(name, u.value, fmt.Sprintf("every --experimental-* flag is gone in etcd %s; the manifest also sets its replacement --%s, which is kept", etcdVersion, to))
		return
	}
	b.keep(name, to, u)
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

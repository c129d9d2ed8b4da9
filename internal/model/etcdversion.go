package model

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// EtcdVersion is an etcd release, major.minor.patch (a pre-release or
// build suffix is kept out of the comparison).
type EtcdVersion struct{ Major, Minor, Patch int }

// ParseEtcdVersion reads "3.7.3", "v3.7.3" or "3.7.3-alpha.0"; "3.7"
// (a cluster version) reads as 3.7.0.
func ParseEtcdVersion(s string) (EtcdVersion, error) {
	t := strings.TrimPrefix(strings.TrimSpace(s), "v")
	if i := strings.IndexAny(t, "-+"); i >= 0 {
		t = t[:i]
	}
	parts := strings.Split(t, ".")
	if len(parts) < 2 || len(parts) > 3 {
		return EtcdVersion{}, fmt.Errorf("etcd version %q: want major.minor.patch", s)
	}
	var n [3]int
	for i, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil || v < 0 {
			return EtcdVersion{}, fmt.Errorf("etcd version %q: %q is not a number", s, p)
		}
		n[i] = v
	}
	return EtcdVersion{n[0], n[1], n[2]}, nil
}

func (v EtcdVersion) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// MinorString is the version as a cluster version: "3.7".
func (v EtcdVersion) MinorString() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

// minors counts minor releases from v to w within one major version
// (negative: w is older); ok is false across major versions.
func (v EtcdVersion) minors(w EtcdVersion) (int, bool) {
	return w.Minor - v.Minor, v.Major == w.Major
}

// before36 is the release every member must run before any member of a
// 3.5 cluster starts 3.6: earlier 3.5 releases leave zombie members or
// unpersisted learner promotions behind that 3.6 refuses (etcd#20967,
// etcd#19557; etcd.io/blog/2025/zombie_members_upgrade).
var before36 = EtcdVersion{3, 5, 26}

// ClusterEtcdVersion is the cluster version the members' server versions
// make: the lowest major.minor (etcd raises it only once every member
// runs the newer one). ok is false when no member reported a version.
func ClusterEtcdVersion(members []Member) (EtcdVersion, bool) {
	var low EtcdVersion
	ok := false
	for _, m := range members {
		v, err := ParseEtcdVersion(m.Version)
		if m.Version == "" || err != nil {
			continue
		}
		v.Patch = 0
		if !ok || v.Major < low.Major || (v.Major == low.Major && v.Minor < low.Minor) {
			low, ok = v, true
		}
	}
	return low, ok
}

// EtcdVersionRefused says why a member of this cluster must not start etcd
// version to; "" when it may. etcd's rules: one minor at a time (a binary
// two minors ahead of the cluster version is refused by the cluster), no
// binary older than the cluster version (going back needs etcd's downgrade
// procedure first), and 3.6 only once every member runs 3.5.26 or later.
// Members that gave no version are not judged (they hold a rollout
// anyway: they are not healthy); with none, there is nothing to refuse.
func EtcdVersionRefused(to string, members []Member) string {
	v, err := ParseEtcdVersion(to)
	if err != nil {
		return fmt.Sprintf("cannot tell the new etcd's version: %v", err)
	}
	cv, ok := ClusterEtcdVersion(members)
	if !ok {
		return ""
	}
	n, sameMajor := cv.minors(v)
	switch {
	case !sameMajor || n > 1:
		return fmt.Sprintf("etcd %s is more than one minor version ahead of the cluster version %s: etcd upgrades one minor at a time (first run a %d.%d release on every member)",
			v, cv.MinorString(), cv.Major, cv.Minor+1)
	case n < 0:
		return fmt.Sprintf("etcd %s is older than the cluster version %s: a downgrade, which etcd allows only through its downgrade procedure (etcdctl downgrade validate/enable) first",
			v, cv.MinorString())
	case n == 1 && cv.Major == 3 && cv.Minor == 5:
		var old []string
		for _, m := range members {
			if mv, err := ParseEtcdVersion(m.Version); err == nil && mv.Minor == 5 && mv.Patch < before36.Patch {
				old = append(old, fmt.Sprintf("%s runs %s", memberName(m), mv))
			}
		}
		slices.Sort(old)
		if len(old) > 0 {
			return fmt.Sprintf("etcd %s: every member must run etcd %s or later before any runs 3.6 (etcd#20967), but %s", v, before36, strings.Join(old, ", "))
		}
	}
	return ""
}

func memberName(m Member) string {
	if m.Name != "" {
		return m.Name
	}
	return fmt.Sprintf("%x", m.ID)
}

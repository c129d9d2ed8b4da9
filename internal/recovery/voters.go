package recovery

import (
	"fmt"
	"slices"
	"strings"
)

// Voter is one voting member as a host's data or etcd knows it: its ID
// (hex, as etcdctl prints it) and its name ("" for a member added but
// never started).
type Voter struct {
	ID   string `json:"id,omitempty"`
	Name string `json:"name,omitempty"`
}

// Voters sources, as an Inspection reports them.
const (
	// VotersEtcd: the member list of the running etcd (serializable: a
	// member without a leader answers it from its own state).
	VotersEtcd = "etcd"
	// VotersDB: the members bucket of the db, read offline.
	VotersDB = "db"
	// VotersObserved: the agent's last observed view of the cluster.
	VotersObserved = "observed"
)

// voterSet is a group of voters, each a set of keys ("id:…", "name:…")
// joined by what any report says about them: a voter named n2 in one
// report and listed by ID in another is one voter once some report
// links that name to that ID.
type voterSet struct {
	parent map[string]string
}

func (s *voterSet) find(k string) string {
	if s.parent == nil {
		s.parent = map[string]string{}
	}
	if _, ok := s.parent[k]; !ok {
		s.parent[k] = k
	}
	for s.parent[k] != k {
		s.parent[k] = s.parent[s.parent[k]]
		k = s.parent[k]
	}
	return k
}

func (s *voterSet) union(a, b string) { s.parent[s.find(a)] = s.find(b) }

func keysOf(v Voter) []string {
	var ks []string
	if v.ID != "" {
		ks = append(ks, "id:"+strings.ToLower(v.ID))
	}
	if v.Name != "" {
		ks = append(ks, "name:"+v.Name)
	}
	return ks
}

// Membership is what a majority must be taken of: every voter set anyone
// knows (the spec's members, and each membership an agent or its data
// reports), joined by member ID and name.
type Membership struct {
	ids  voterSet
	sets []knownSet
	all  map[string]bool // the roots of every voter, after Know
}

type knownSet struct {
	from   string
	voters []Voter
}

// KnownVoters joins the spec's member names and every reported
// membership of ins.
func KnownVoters(spec []string, ins []Inspection) *Membership {
	m := &Membership{}
	var specSet []Voter
	for _, n := range spec {
		specSet = append(specSet, Voter{Name: n})
	}
	m.sets = append(m.sets, knownSet{from: "the spec", voters: specSet})
	for _, i := range ins {
		if len(i.Voters) > 0 {
			m.sets = append(m.sets, knownSet{from: fmt.Sprintf("%s's %s", i.Name, votersFromText(i.VotersFrom)), voters: i.Voters})
		}
		if i.MemberID != "" {
			// The agent of i.Name runs member i.MemberID.
			m.link(Voter{ID: i.MemberID, Name: i.Name})
		}
	}
	for _, s := range m.sets {
		for _, v := range s.voters {
			m.link(v)
		}
	}
	m.all = map[string]bool{}
	for _, s := range m.sets {
		for _, v := range s.voters {
			if ks := keysOf(v); len(ks) > 0 {
				m.all[m.ids.find(ks[0])] = true
			}
		}
	}
	return m
}

func votersFromText(from string) string {
	switch from {
	case VotersEtcd:
		return "etcd member list"
	case VotersDB:
		return "data (db members bucket)"
	case VotersObserved:
		return "last observed cluster"
	}
	return "reported voters"
}

func (m *Membership) link(v Voter) {
	ks := keysOf(v)
	for _, k := range ks {
		m.ids.find(k)
	}
	for _, k := range ks[min(1, len(ks)):] {
		m.ids.union(k, ks[0])
	}
}

// Size is how many voters the union of every known set has.
func (m *Membership) Size() int { return len(m.all) }

// label names a voter: its names, else its IDs.
func (m *Membership) label(root string) string {
	var names, ids []string
	for k := range m.ids.parent {
		if m.ids.find(k) != root {
			continue
		}
		if n, ok := strings.CutPrefix(k, "name:"); ok {
			names = append(names, n)
		} else {
			ids = append(ids, strings.TrimPrefix(k, "id:"))
		}
	}
	slices.Sort(names)
	slices.Sort(ids)
	if len(names) > 0 {
		return strings.Join(names, "/")
	}
	return "member " + strings.Join(ids, "/")
}

// covers: voter root is one of covered (names, or member IDs in hex).
func (m *Membership) covers(root string, covered []string) bool {
	for _, c := range covered {
		for _, k := range []string{"name:" + c, "id:" + strings.ToLower(c)} {
			if _, ok := m.ids.parent[k]; ok && m.ids.find(k) == root {
				return true
			}
		}
	}
	return false
}

// CheckMajority says why covered (the source, the members fenced or to
// be fenced, those the operator vouched for) is not a strict majority of
// every voter set anyone knows, or nil. The rule that keeps two clusters
// from ever both going on: the old cluster (or a second recovery) needs a
// majority of its voters, and covered members never run their old member
// again; so covered must be a majority of every set the old cluster's
// voters could be, the union of them all included. Any voter that is not
// covered (an unreachable host, a member only an ID names) counts as one
// that could still serve.
func (m *Membership) CheckMajority(covered []string) error {
	check := func(from string, roots []string) error {
		var in, out []string
		for _, r := range roots {
			if m.covers(r, covered) {
				in = append(in, m.label(r))
			} else {
				out = append(out, m.label(r))
			}
		}
		if len(in) > len(roots)/2 {
			return nil
		}
		slices.Sort(out)
		return fmt.Errorf("%s cannot be fenced from here, and only %d of the %d voters %s knows (%s) are the source, fenced or assumed fenced: not a majority, so the others could go on as the old cluster next to the recovered one",
			strings.Join(out, ", "), len(in), len(roots), from, strings.Join(m.labels(roots), ", "))
	}
	all := make([]string, 0, len(m.all))
	for r := range m.all {
		all = append(all, r)
	}
	if err := check("anyone", all); err != nil {
		return err
	}
	for _, s := range m.sets {
		seen := map[string]bool{}
		var roots []string
		for _, v := range s.voters {
			if ks := keysOf(v); len(ks) > 0 {
				if r := m.ids.find(ks[0]); !seen[r] {
					seen[r], roots = true, append(roots, r)
				}
			}
		}
		if err := check(s.from, roots); err != nil {
			return err
		}
	}
	return nil
}

func (m *Membership) labels(roots []string) []string {
	var out []string
	for _, r := range roots {
		out = append(out, m.label(r))
	}
	slices.Sort(out)
	return out
}

// Known names every voter of the union, sorted.
func (m *Membership) Known() []string {
	roots := make([]string, 0, len(m.all))
	for r := range m.all {
		roots = append(roots, r)
	}
	return m.labels(roots)
}

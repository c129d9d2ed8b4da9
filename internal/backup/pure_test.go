package backup

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

func TestNames(t *testing.T) {
	at := time.Date(2026, 1, 15, 10, 30, 5, 999, time.FixedZone("CET", 3600))
	name := FileName("prod-1.a", at, 12345)
	if name != "prod-1.a-20260115T093005Z-rev12345.db" {
		t.Fatalf("FileName = %q", name)
	}
	tests := []struct {
		cluster, name string
		ok            bool
		rev           int64
	}{
		{"prod-1.a", name, true, 12345},
		{"prod", name, false, 0},   // another cluster's ("prod-1.a" starts with "prod-")
		{"prod-1", name, false, 0}, // ditto
		{"prod-1.a", SidecarName(name), false, 0},
		{"prod-1.a", partialName("prod-1.a", at), false, 0},
		{"prod-1.a", "prod-1.a-20260115T093005Z-rev0.db", true, 0}, // a cluster that never had a key
		{"prod-1.a", "prod-1.a-20260115T093005Z-rev-1.db", false, 0},
		{"prod-1.a", "prod-1.a-20261315T093005Z-rev1.db", false, 0}, // month 13
		{"prod-1.a", "prod-1.a-20260115T093005Z-rev1.db.tmp", false, 0},
		{"prod-1.a", "xprod-1.a-20260115T093005Z-rev1.db", false, 0},
		{"a.c", "abc-20260115T093005Z-rev1.db", false, 0}, // '.' is not a wildcard
	}
	for _, tt := range tests {
		p, ok := parseName(tt.cluster, tt.name)
		if ok != tt.ok || p.Revision != tt.rev {
			t.Errorf("parseName(%q, %q) = %+v, %v; want rev %d, %v", tt.cluster, tt.name, p, ok, tt.rev, tt.ok)
		}
	}
	if p, _ := parseName("prod-1.a", name); !p.Time.Equal(at.Truncate(time.Second)) {
		t.Errorf("time = %v, want %v", p.Time, at)
	}
}

// entry is a snapshot of cluster c in the table tests: seq orders, rev is
// the revision, by/member/verified fill the sidecar (by "" = no sidecar).
func entry(seq, rev int64, by, member string, verified bool) Entry {
	at := time.Date(2026, 1, 1, 0, 0, int(seq), 0, time.UTC)
	e := Entry{File: FileName("c", at, rev), Time: at, Revision: rev}
	if by != "" {
		e.Sidecar = &Sidecar{Writer: writer, By: by, Cluster: "c", Member: member, File: e.File, Seq: seq, Verified: verified, SHA256: "x",
			Source: Source{ClusterID: "c1d"}}
	}
	return e
}

func files(es []Entry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.File)
	}
	return out
}

func TestPrune(t *testing.T) {
	me := Owner{Cluster: "c", Member: "a", ClusterID: "c1d"}
	own := func(seq int64) Entry { return entry(seq, 100+seq, BySchedule, "a", true) }
	clockBack := own(5)
	clockBack.Time = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC) // written after a clock jump back
	clockBack.File = FileName("c", clockBack.Time, clockBack.Revision)
	clockBack.Sidecar.File = clockBack.File
	otherCluster := own(1)
	otherCluster.Sidecar.Cluster = "d"
	renamed := own(1)
	renamed.Sidecar.File = "c-20250101T000000Z-rev1.db"
	noSum := own(1)
	noSum.Sidecar.SHA256 = ""
	foreignName := own(1)
	foreignName.File = "d" + foreignName.File[1:]
	foreignName.Sidecar.File = foreignName.File
	// Planted by another local user: huge seqs, all claims ours.
	planted := func(seq int64) Entry {
		e := own(seq)
		e.Distrust = "the file is owned by uid 65534, not this agent's user or root"
		return e
	}
	// The same cluster name and member names, another cluster.
	twin := func(seq int64) Entry {
		e := own(seq)
		e.Sidecar.Source.ClusterID = "7417"
		return e
	}
	// Written before sidecars carried the cluster ID: unknown.
	old := own(1)
	old.Sidecar.Source.ClusterID = ""
	damaged := func(seq int64) Entry {
		e := own(seq)
		e.Sidecar.SHA256 = "damaged" // the file's sha256 is not this
		return e
	}
	tests := []struct {
		name    string
		entries []Entry
		keep    int
		want    []Entry
	}{
		{"keep 3 of 5", []Entry{own(1), own(2), own(3), own(4), own(5)}, 3, []Entry{own(2), own(1)}},
		{"fewer than keep", []Entry{own(1), own(2)}, 3, nil},
		{"keep below 1 keeps 1", []Entry{own(1), own(2)}, 0, []Entry{own(1)}},
		{"unverified never", []Entry{entry(1, 1, BySchedule, "a", false), own(2), own(3)}, 1, []Entry{own(2)}},
		{"no sidecar never", []Entry{entry(0, 1, "", "", false), own(2), own(3)}, 1, []Entry{own(2)}},
		{"by hand never", []Entry{entry(1, 1, ByHand, "a", true), own(2), own(3)}, 1, []Entry{own(2)}},
		{"another member's never", []Entry{entry(1, 1, BySchedule, "b", true), own(2), own(3)}, 1, []Entry{own(2)}},
		{"another cluster's sidecar never", []Entry{otherCluster, own(2), own(3)}, 1, []Entry{own(2)}},
		{"sidecar of another file never", []Entry{renamed, own(2), own(3)}, 1, []Entry{own(2)}},
		{"sidecar without sha256 never", []Entry{noSum, own(2), own(3)}, 1, []Entry{own(2)}},
		{"name of another cluster never", []Entry{foreignName, own(2), own(3)}, 1, []Entry{own(2)}},
		{"newest by hand: own newest still kept", []Entry{own(1), own(2), entry(3, 200, ByHand, "a", true)}, 1, []Entry{own(1)}},
		{"newest unverified: newest verified kept", []Entry{own(1), own(2), entry(3, 200, BySchedule, "a", false)}, 1, []Entry{own(1)}},
		{"clock set back: the name's time is old, the seq is newest", []Entry{own(3), own(4), clockBack}, 1, []Entry{own(4), own(3)}},
		{"revision breaks a seq tie", []Entry{entry(1, 5, BySchedule, "a", true), entry(1, 9, BySchedule, "a", true)}, 1, []Entry{entry(1, 5, BySchedule, "a", true)}},
		{"planted by another user: neither kept in the count nor deleted", []Entry{own(1), own(2), own(3), planted(1e15), planted(1e15 + 1)}, 2, []Entry{own(1)}},
		{"planted newest of the dir: ours still the newest", []Entry{own(1), own(2), planted(1e15)}, 1, []Entry{own(1)}},
		{"another cluster of the same names: neither counted nor deleted", []Entry{own(1), own(2), own(3), twin(10), twin(11), twin(12)}, 2, []Entry{own(1)}},
		{"a sidecar without cluster ID: unknown, never deleted", []Entry{old, own(2), own(3)}, 1, []Entry{own(2)}},
		{"damaged: not kept in the count, not deleted", []Entry{own(1), own(2), own(3), damaged(4)}, 2, []Entry{own(1)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hashed := map[string]bool{}
			intact := func(e Entry) bool { hashed[e.File] = true; return e.Sidecar.SHA256 != "damaged" }
			got := Prune(tt.entries, me, tt.keep, intact)
			if g, w := files(got), files(tt.want); !equal(g, w) {
				t.Errorf("Prune = %q, want %q", g, w)
			}
			for _, e := range got {
				if hashed[e.File] {
					t.Errorf("%s was hashed: only the kept ones need to be (the deleted are hashed again before deleting)", e.File)
				}
			}
		})
	}
	t.Run("cluster ID unknown: nothing", func(t *testing.T) {
		if got := Prune([]Entry{own(1), own(2), own(3)}, Owner{Cluster: "c", Member: "a"}, 1, func(Entry) bool { return true }); len(got) != 0 {
			t.Errorf("Prune = %q, want nothing without this cluster's ID", files(got))
		}
	})
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestNextRun(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	h := time.Hour
	tests := []struct {
		name     string
		lastOK   time.Time
		lastFail time.Time
		failures int
		want     time.Time
	}{
		{"never: now", time.Time{}, time.Time{}, 0, now},
		{"an interval after the last success", now.Add(-10 * time.Minute), time.Time{}, 0, now.Add(50 * time.Minute)},
		{"overdue: now or earlier", now.Add(-3 * h), time.Time{}, 0, now.Add(-2 * h)},
		{"last success in the future (clock set back): now", now.Add(24 * h), time.Time{}, 0, now},
		{"one failure: retry in 10s", now.Add(-2 * h), now, 1, now.Add(10 * time.Second)},
		{"three failures: 40s", now.Add(-2 * h), now, 3, now.Add(40 * time.Second)},
		{"many failures: at most the interval", now.Add(-2 * h), now, 30, now.Add(h)},
		{"failure time in the future: ignored", now.Add(-2 * h), now.Add(h), 2, now.Add(-h)},
		{"failure before a recent success does not delay it", now.Add(-time.Minute), now.Add(-30 * time.Minute), 1, now.Add(59 * time.Minute)},
	}
	for _, tt := range tests {
		if got := NextRun(now, tt.lastOK, tt.lastFail, tt.failures, h); !got.Equal(tt.want) {
			t.Errorf("%s: NextRun = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestRestoreCheckDue(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		last     time.Time
		interval time.Duration
		want     bool
	}{
		{time.Time{}, time.Hour, true},
		{now.Add(-time.Hour), time.Hour, false},
		{now.Add(-25 * time.Hour), time.Hour, true},
		{now.Add(-25 * time.Hour), 48 * time.Hour, false},
		{now.Add(time.Hour), time.Hour, true},
	}
	for _, tt := range tests {
		if got := restoreCheckDue(now, tt.last, tt.interval); got != tt.want {
			t.Errorf("restoreCheckDue(last %v, every %v) = %v, want %v", tt.last, tt.interval, got, tt.want)
		}
	}
}

func TestChooseSource(t *testing.T) {
	m := func(id uint64, name string, healthy bool, idx uint64) model.Member {
		return model.Member{ID: id, Name: name, Healthy: healthy, Leader: 1, RaftIndex: idx, ClientURLs: []string{"http://" + name}}
	}
	learner := m(4, "d", true, 99)
	learner.IsLearner = true
	unstarted := m(5, "", true, 99)
	tests := []struct {
		name    string
		members []model.Member
		foreign []string
		self    string
		want    string
		why     string
	}{
		{"local follower", []model.Member{m(1, "a", true, 9), m(2, "b", true, 9), m(3, "c", true, 9)}, nil, "b", "b", "local"},
		{"local is leader: the follower furthest ahead", []model.Member{m(1, "a", true, 9), m(2, "b", true, 7), m(3, "c", true, 8)}, nil, "a", "c", "follower"},
		{"local unhealthy: a follower", []model.Member{m(1, "a", true, 9), m(2, "b", false, 9), m(3, "c", true, 9)}, nil, "b", "c", "follower"},
		{"only the leader", []model.Member{m(1, "a", true, 9), m(2, "b", false, 9), m(3, "c", false, 9)}, nil, "b", "a", "leader"},
		{"learners and unstarted never", []model.Member{m(1, "a", true, 9), learner, unstarted}, nil, "d", "a", "leader"},
		{"none healthy", []model.Member{m(1, "a", false, 9)}, nil, "a", "", ""},
		{"foreign members", []model.Member{m(1, "a", true, 9), m(2, "b", true, 9)}, []string{"x answers for cluster 2"}, "b", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, why, err := ChooseSource(model.Cluster{LeaderID: 1, Members: tt.members, Foreign: tt.foreign}, tt.self)
			if tt.want == "" {
				if err == nil {
					t.Fatalf("chose %s, want none", got.Name)
				}
				return
			}
			if err != nil || got.Name != tt.want || !strings.Contains(why, tt.why) {
				t.Fatalf("= %s (%s), %v; want %s (%s)", got.Name, why, err, tt.want, tt.why)
			}
		})
	}
}

// TestRemoveChecksAgain: retention re-reads the file before deleting it;
// a file that is no longer what its sidecar recorded is kept.
func TestRemoveChecksAgain(t *testing.T) {
	dir := t.TempDir()
	var entries []Entry
	for seq := int64(1); seq <= 3; seq++ {
		e := entry(seq, 100+seq, BySchedule, "a", true)
		e.Dir = dir
		body := []byte(fmt.Sprintf("snapshot %d", seq))
		if err := os.WriteFile(e.Path(), body, 0o600); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(body)
		e.Sidecar.SHA256 = hex.EncodeToString(sum[:])
		if err := writeSidecar(filepath.Join(dir, SidecarName(e.File)), e.Sidecar); err != nil {
			t.Fatal(err)
		}
		entries = append(entries, e)
	}
	// The oldest was replaced after it was verified.
	if err := os.WriteFile(entries[0].Path(), []byte("something else"), 0o600); err != nil {
		t.Fatal(err)
	}
	removed, err := RemovePruned(dir, Owner{Cluster: "c", Member: "a", ClusterID: "c1d"}, 1)
	if !slices.Equal(removed, []string{entries[1].File}) || err == nil || !strings.Contains(err.Error(), "sha256") {
		t.Fatalf("RemovePruned = %q, %v; want only %s removed and a refusal for %s", removed, err, entries[1].File, entries[0].File)
	}
	if _, err := os.Stat(entries[0].Path()); err != nil {
		t.Errorf("the replaced file was deleted: %v", err)
	}
}

// TestNewestVerified: the newest entry of this cluster's ID whose file
// still has its sidecar's sha256; a changed file is noticed although its
// sha256 was cached, an old sidecar without a cluster ID and an unknown
// cluster ID recommend nothing.
func TestNewestVerified(t *testing.T) {
	dir := t.TempDir()
	var entries []Entry
	for seq := int64(1); seq <= 3; seq++ {
		e := entry(seq, 100+seq, BySchedule, "a", true)
		e.Dir = dir
		body := fmt.Appendf(nil, "snapshot %d", seq)
		if err := os.WriteFile(e.Path(), body, 0o600); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(body)
		e.Sidecar.SHA256 = hex.EncodeToString(sum[:])
		entries = append(entries, e)
	}
	newest := func(id string) string {
		e, ok := NewestVerified(entries, id)
		if !ok {
			return ""
		}
		return e.File
	}
	if got := newest("c1d"); got != entries[2].File {
		t.Fatalf("newest = %q, want %q", got, entries[2].File)
	}
	// Same size, another content: the cached sum no longer applies.
	if err := os.WriteFile(entries[2].Path(), []byte("snapshot X"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := newest("c1d"); got != entries[1].File {
		t.Errorf("after the newest changed: %q, want %q", got, entries[1].File)
	}
	entries[1].Sidecar.Source.ClusterID = "" // an old sidecar: unknown
	if got := newest("c1d"); got != entries[0].File {
		t.Errorf("with an old sidecar: %q, want %q", got, entries[0].File)
	}
	if got := newest(""); got != "" {
		t.Errorf("cluster ID unknown: %q, want none", got)
	}
	if got := newest("7417"); got != "" {
		t.Errorf("another cluster's ID: %q, want none", got)
	}
	if err := os.Chmod(dir, 0o770); err != nil {
		t.Fatal(err)
	}
	if got := newest("c1d"); got != "" {
		t.Errorf("in a group-writable dir: %q, want none", got)
	}
}

func TestSaveDir(t *testing.T) {
	shared := &spec.Spec{Members: []spec.Member{{Name: "a", SnapshotDir: "/b"}, {Name: "c", SnapshotDir: "/b"}}}
	perMember := &spec.Spec{Members: []spec.Member{{Name: "a", SnapshotDir: "/b/a"}, {Name: "c", SnapshotDir: "/b/c"}}}
	tests := []struct {
		name     string
		s        *spec.Spec
		out      string
		self     spec.Member
		isMember bool
		want     string // "" = refused
	}{
		{"--out wins", perMember, "/o", perMember.Members[1], true, "/o"},
		{"this host's member", perMember, "", perMember.Members[1], true, "/b/c"},
		{"no member, shared dir", shared, "", spec.Member{}, false, "/b"},
		{"no member, per-member dirs: refused", perMember, "", spec.Member{}, false, ""},
		{"no member, --out", perMember, "/o", spec.Member{}, false, "/o"},
	}
	for _, tt := range tests {
		got, err := SaveDir(tt.s, tt.out, tt.self, tt.isMember)
		if got != tt.want || (err != nil) != (tt.want == "") {
			t.Errorf("%s: SaveDir = %q, %v; want %q", tt.name, got, err, tt.want)
		}
	}
}

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/etcdkeeper/etcdkeeper/test/testbed"
)

// A repair takes a safety snapshot of the keyspace before it changes
// anything; with repair.snapshotMaxAge, a verified scheduled snapshot
// (backup.interval) at most that old stands for it, and the repair
// transfers nothing before it starts. The 100 MB repair is timed both ways
// on the same cluster: the spec switches repair.snapshotMaxAge between 0s
// and 1h before each repair.

// reuseSpec is the spec's repair: and backup: sections: maxAge on sets
// repair.snapshotMaxAge to 1h (0s: a fresh safety snapshot every repair),
// schedule on sets backup.interval to 1h (0s: no scheduled snapshots).
func reuseSpec(maxAge, schedule bool) string {
	age, interval := "0s", "0s"
	if maxAge {
		age = "1h"
	}
	if schedule {
		interval = "1h"
	}
	return repairSpec + "  snapshotMaxAge: " + age + "\nbackup:\n  interval: " + interval + "\n"
}

// setReuse rewrites the spec for the next repair, scheduled snapshots on:
// the agent reads it when it starts.
func setReuse(c *testbed.Cluster, on bool) {
	c.Extra = reuseSpec(on, true)
	c.WriteSpec()
}

// snapshotSidecar is what the bench reads of a snapshot's sidecar
// (<file>.json, internal/backup.Sidecar).
type snapshotSidecar struct {
	By       string    `json:"by"`
	File     string    `json:"file"`
	Verified bool      `json:"verified"`
	TakenAt  time.Time `json:"takenAt"`
}

// scheduledSnapshot turns the agents' snapshot schedule on (backup.interval
// 1h, after the load: the first snapshot of a schedule is due at once when
// the agent started more than 10 s ago) and waits until member name's
// backup dir holds a snapshot its sidecar says the schedule took and
// verified, and until every agent has restore-checked its first snapshot
// (each check runs a throwaway etcd: none may still run during a timed
// repair). It returns the snapshot's path.
func scheduledSnapshot(r testbed.TB, c *testbed.Cluster, name string) string {
	return scheduledSnapshotWith(r, c, name, reuseSpec(false, true))
}

// defaultsSpec is the spec's repair: and backup: sections as the defaults
// have them, scheduled snapshots on (backup.interval 1h, written out: the
// test bed turns them off when the spec names no backup:), and
// repair.snapshotMaxAge left out, so its default (twice the interval)
// applies.
const defaultsSpec = repairSpec + "backup:\n  interval: 1h\n"

// scheduledSnapshotWith is scheduledSnapshot with the spec's extra YAML
// extra (which must turn the schedule on).
func scheduledSnapshotWith(r testbed.TB, c *testbed.Cluster, name, extra string) string {
	c.Extra = extra
	c.WriteSpec()
	var path string
	testbed.Eventually(r, 5*time.Minute, "a verified scheduled snapshot of "+name+" and every agent's restore check", func() string {
		for _, n := range c.AllNames() {
			b, _ := os.ReadFile(c.LogPath(n))
			if i := strings.Index(string(b), "scheduled snapshot: "); i >= 0 {
				r.Fatalf("%s: %s", n, firstLine(string(b[i:])))
			}
			if !strings.Contains(string(b), "snapshot restored and compared") {
				return n + " has not restore-checked a snapshot yet"
			}
		}
		path = verifiedScheduled(c, name)
		if path == "" {
			return "no verified scheduled snapshot of " + name
		}
		return ""
	})
	return path
}

// verifiedScheduled is the newest snapshot in member name's backup dir
// whose sidecar says the schedule took and verified it.
func verifiedScheduled(c *testbed.Cluster, name string) string {
	sidecars, _ := filepath.Glob(filepath.Join(c.StateDir(name), "backups", "*.db.json"))
	var newest string
	var at time.Time
	for _, s := range sidecars {
		b, err := os.ReadFile(s)
		if err != nil {
			continue
		}
		var sc snapshotSidecar
		if json.Unmarshal(b, &sc) != nil || !sc.Verified || sc.By != "schedule" || sc.File != strings.TrimSuffix(filepath.Base(s), ".json") {
			continue
		}
		if sc.TakenAt.After(at) {
			newest, at = strings.TrimSuffix(s, ".json"), sc.TakenAt
		}
	}
	return newest
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// checkReuse proves from member name's agent which safety snapshot its
// last repair kept: the rejoin journal's snapshotPath and the log's
// "rejoin step" snapshot line (reused: true when a scheduled snapshot
// stood for it). want is the scheduled snapshot the repair must have
// reused, "" for a repair that must have taken a fresh one.
func checkReuse(r testbed.TB, c *testbed.Cluster, name string, e event, want string) {
	j := c.Journal(name)
	got, _ := j["snapshotPath"].(string)
	if got != e.SnapshotPath {
		r.Errorf("%s: the rejoin journal's snapshotPath %q, its log's last snapshot step %q", name, got, e.SnapshotPath)
	}
	switch {
	case want != "" && (got != want || !e.Reused):
		r.Errorf("%s: the repair kept %q (reused %v), want the scheduled snapshot %s reused", name, got, e.Reused, want)
	case want == "" && (e.Reused || !strings.HasPrefix(got, filepath.Join(c.StateDir(name), "snapshots")+string(filepath.Separator))):
		r.Errorf("%s: the repair kept %q (reused %v), want a fresh safety snapshot", name, got, e.Reused)
	}
}

// lastSnapshotStep reads the "rejoin step" snapshot line of an agent's
// log since its last start: the path it kept and whether it reused a
// scheduled one.
func lastSnapshotStep(logPath string) (path string, reused bool) {
	b, _ := os.ReadFile(logPath)
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, `"msg":"agent starting"`) {
			path, reused = "", false
		}
		if !strings.Contains(line, `"msg":"rejoin step"`) || !strings.Contains(line, `"step":"snapshot"`) {
			continue
		}
		var rec struct {
			Path   string `json:"path"`
			Reused bool   `json:"reused"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil {
			path, reused = rec.Path, rec.Reused
		}
	}
	return path, reused
}

// reuseNote says how many of a row's repairs reused the scheduled snapshot.
func reuseNote(evs []event) string {
	n := 0
	for _, e := range evs {
		if e.Reused {
			n++
		}
	}
	return fmt.Sprintf("%d of %d reused it (journal and log)", n, len(evs))
}

package backup

import (
	"fmt"
	"regexp"
	"strconv"
	"time"
)

// timeLayout is the UTC time in a snapshot's name.
const timeLayout = "20060102T150405Z"

// Name parts that are not the final name's: files being written and the
// throwaway restore dirs.
const (
	partialPrefix = ".partial-"
	restorePrefix = ".restore-check-"
	// drillPrefix: the drill's scratch dir (0700): the downloaded
	// snapshot, its decrypted copy and the restored data dir, all removed
	// when the drill ends.
	drillPrefix   = ".restore-drill-"
	sidecarSuffix = ".json"
)

// FileName is the name of a verified snapshot of cluster taken at t with
// revision rev: <cluster>-<UTC time>-rev<revision>.db.
func FileName(cluster string, t time.Time, rev int64) string {
	return fmt.Sprintf("%s-%s-rev%d.db", cluster, t.UTC().Format(timeLayout), rev)
}

// SidecarName is the name of the sidecar of snapshot file.
func SidecarName(file string) string { return file + sidecarSuffix }

// partialName is the temporary name a snapshot is written under: it never
// matches FileName's pattern.
func partialName(cluster string, t time.Time) string {
	return partialPrefix + cluster + "-" + t.UTC().Format(timeLayout) + ".db"
}

// parsed is what a snapshot's name says.
type parsed struct {
	Time     time.Time
	Revision int64
}

// parseName reads a snapshot name of cluster; ok is false for any other
// file, including other clusters' snapshots and temporary names.
func parseName(cluster, name string) (parsed, bool) {
	re := regexp.MustCompile(`^` + regexp.QuoteMeta(cluster) + `-(\d{8}T\d{6}Z)-rev(\d{1,19})\.db$`)
	m := re.FindStringSubmatch(name)
	if m == nil {
		return parsed{}, false
	}
	t, err := time.Parse(timeLayout, m[1])
	if err != nil {
		return parsed{}, false
	}
	rev, err := strconv.ParseInt(m[2], 10, 64)
	if err != nil {
		return parsed{}, false
	}
	return parsed{Time: t, Revision: rev}, true
}

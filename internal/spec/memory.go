package spec

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// maxSnapshotCount is where validate starts warning about etcd's
// snapshot-count: etcd keeps that many raft entries in memory beyond its
// last snapshot (5 000 compacted after each, plus what the followers
// lag), so its memory grows with it; OpenShift and etcd-druid lowered it
// for etcd killed by the OOM killer. etcd's own default is 10 000.
const maxSnapshotCount = 10000

// MemoryWarnings are what the spec's etcd flags say of this host's
// memory (memTotal bytes; 0: not known): a quota-backend-bytes above half
// of it (the db is mmapped, and a full one is paged in by a
// defragmentation or a snapshot), and a snapshot-count above 10 000.
// validate prints them; they stop nothing.
func MemoryWarnings(s *Spec, memTotal int64) Errors {
	var warns Errors
	check := func(flags map[string]string, line int, where string) {
		if v, ok := flags["quota-backend-bytes"]; ok && memTotal > 0 {
			if q, err := strconv.ParseInt(v, 10, 64); err == nil && q > memTotal/2 {
				warns = append(warns, Error{File: s.Path, Line: line, Msg: fmt.Sprintf(
					"%squota-backend-bytes %s is above half of this host's memory (%s): etcd maps its whole db file, and a full one paged in (a defragmentation, a snapshot) leaves the host short; the kernel's OOM killer then ends etcd. Give the host more memory or lower the quota",
					where, humanBytes(q), humanBytes(memTotal))})
			}
		}
		if v, ok := flags["snapshot-count"]; ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > maxSnapshotCount {
				warns = append(warns, Error{File: s.Path, Line: line, Msg: fmt.Sprintf(
					"%ssnapshot-count %d is above %d: etcd keeps that many raft entries in memory between snapshots, and its memory grows with it (etcd's default is 10000; OpenShift and etcd-druid run lower for etcd killed by the OOM killer)",
					where, n, maxSnapshotCount)})
			}
		}
	}
	check(s.Etcd.Flags, s.Etcd.Line, "etcd.flags: ")
	for _, m := range s.Members {
		check(m.Flags, m.Line, "member "+m.Name+": flags: ")
	}
	return warns
}

// MemTotal is this host's memory in bytes (/proc/meminfo), 0 when not
// known.
func MemTotal() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			f := strings.Fields(rest)
			if len(f) >= 1 {
				if kb, err := strconv.ParseInt(f[0], 10, 64); err == nil {
					return kb << 10
				}
			}
		}
	}
	return 0
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d bytes", n)
}

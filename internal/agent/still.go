package agent

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"time"

	"go.uber.org/zap"

	"github.com/etcdkeeper/etcdkeeper/internal/etcdproc"
	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/repair"
)

// observeStill looks at the silent etcd's process and data dir: how long
// it has been stopped (SIGSTOP), how long neither its CPU time nor its
// data dir moved (see etcdproc.Stillness), and whether it waits on the
// disk now.
func (a *Agent) observeStill(l *model.Local, dataDir string) {
	p := a.etcd.Process()
	if p == nil {
		return
	}
	if a.stillPID != p.PID() {
		a.still.Reset()
		a.stillPID = p.PID()
	}
	x, err := etcdproc.ReadProc(p.PID())
	if err != nil {
		a.lg.Debug("reading the etcd process's state", zap.Error(err))
		return
	}
	l.StoppedFor, l.StillFor = a.still.Observe(time.Now(), x, dataStamp(dataDir))
	l.DiskSleep = x.State == etcdproc.ProcDiskSleep
}

// dataStamp changes whenever etcd writes to its WAL or snap dir: the
// number of files, their sizes and the newest mtime.
func dataStamp(dir string) string {
	var n, size, newest int64
	for _, sub := range []string{"wal", "snap"} {
		_ = filepath.WalkDir(filepath.Join(dir, "member", sub), func(_ string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return nil
			}
			if info, err := d.Info(); err == nil {
				n, size, newest = n+1, size+info.Size(), max(newest, info.ModTime().UnixNano())
			}
			return nil
		})
	}
	return fmt.Sprintf("%d/%d/%d", n, size, newest)
}

// exitVerdict classifies an exit of etcd; a kill by the agent itself is
// its own (the signal alone would blame an operator or the OOM killer).
func exitVerdict(e etcdproc.Exit) repair.Verdict {
	if e.ByAgent != "" {
		return repair.Verdict{Class: repair.ClassNone, Reason: "etcd was killed by the agent: " + e.ByAgent, Evidence: "SIGKILL sent by the agent"}
	}
	return repair.Classify(repair.Exit{Code: e.Code, Signal: e.Signal, Tail: e.Tail, OOM: e.OOM})
}

// kill ends a stopped etcd at once with SIGKILL: it cannot act on
// SIGTERM. The start path then decides again, as after stop.
func (a *Agent) kill(why string) (string, bool, error) {
	a.lg.Error("stopping etcd", zap.String("reason", why), zap.String("signal", "SIGKILL"))
	e, err := a.etcd.Kill(why)
	if err != nil {
		return "killing etcd", false, err
	}
	a.noteExit(e.String(), e.Uptime, exitVerdict(e), false)
	return why, true, nil
}

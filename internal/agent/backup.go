package agent

import (
	"context"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/backup"
)

// startBackups runs the scheduled snapshots in their own goroutine, with
// their own timer: a snapshot of a large db never holds up a pass or the
// watchdog. The returned stop ends it and waits for it (bounded), before
// Run's shutdown stops etcd.
func (a *Agent) startBackups(ctx context.Context) (stop func()) {
	s := backup.NewScheduler(backup.Config{Spec: a.Spec, Logger: a.lg.Named("backup"), Metrics: a.metrics.Backup})
	a.mu.Lock()
	a.backups = s
	a.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Run(ctx)
	}()
	return func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
		}
	}
}

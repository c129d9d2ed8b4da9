package agent

import (
	"context"
	"fmt"
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

// snapshotClusterID is the cluster (hex ID) whose snapshots this host's
// recovery report may offer: the one its data or its etcd says (data),
// else, when the data cannot tell (corrupt, lost), the one the marker
// says it last ran in. "" when neither knows: then none is offered, for
// a snapshot of a same-named other cluster sharing the dir must never be.
func (a *Agent) snapshotClusterID(data string) string {
	if data != "" {
		return data
	}
	if m, err := a.loadMarker(); err == nil && m != nil && m.ClusterID != 0 {
		return fmt.Sprintf("%x", m.ClusterID)
	}
	return ""
}

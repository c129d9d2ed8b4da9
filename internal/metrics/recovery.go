package metrics

import "github.com/prometheus/client_golang/prometheus"

// WatchFenceStale registers etcdkeeper_recovery_fence_stale, read from
// stale at each scrape: 1 while this host is fenced by a recovery whose
// source has not started in time (recovery.FenceStaleAfter). Its old
// member stays stopped until the source starts or `recover --abort ID`.
func (m *Metrics) WatchFenceStale(stale func() bool) {
	m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "etcdkeeper_recovery_fence_stale",
		Help: "1 while this host is fenced by a recovery whose source has not started within 2 minutes: its member stays stopped until the source starts or etcdkeeper recover --abort ID.",
	}, func() float64 {
		if stale() {
			return 1
		}
		return 0
	}))
}

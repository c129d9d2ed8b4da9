package metrics

import "github.com/prometheus/client_golang/prometheus"

// Build is what the agent runs, and whether a new binary waits on disk.
type Build struct {
	// Info is etcdkeeper_build_info{version,etcd_version}: 1 for the
	// build this agent runs (a rollout shows as the series moving from
	// one version to the next, member by member).
	Info *prometheus.GaugeVec
	// Pending is 1 while the file at the agent's path is another build
	// than the one it runs (a package upgrade not yet rolled onto this
	// host, or one refused by the etcd version preflight).
	Pending prometheus.Gauge
}

func newBuild() *Build {
	return &Build{
		Info: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "etcdkeeper_build_info",
			Help: "1 for the etcdkeeper version this agent runs and the version of the etcd built into it."}, []string{"version", "etcd_version"}),
		Pending: prometheus.NewGauge(prometheus.GaugeOpts{Name: "etcdkeeper_upgrade_pending",
			Help: "1 while the etcdkeeper binary on disk is another build than the running agent (a package upgrade waiting for this host's turn, or refused: see the agent's decision)."}),
	}
}

func (b *Build) collectors() []prometheus.Collector { return []prometheus.Collector{b.Info, b.Pending} }

// SetBuild records the running build.
func (m *Metrics) SetBuild(version, etcdVersion string) {
	m.Build.Info.Reset()
	m.Build.Info.WithLabelValues(version, etcdVersion).Set(1)
}

package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Space are the members' db sizes, as last observed by this agent, and
// this agent's defragmentations.
type Space struct {
	DBSize      *prometheus.GaugeVec // member
	DBInUse     *prometheus.GaugeVec // member
	Quota       *prometheus.GaugeVec // member
	FreeRatio   *prometheus.GaugeVec // member
	DefragDue   *prometheus.GaugeVec // member
	DefragRuns  *prometheus.CounterVec
	DefragTime  prometheus.Histogram
	DefragFreed prometheus.Counter
	// NoSpaceAlarm is 1 while a NOSPACE alarm names the member; NoSpaceFull
	// 1 while the data in use fills the quota (the procedure cannot
	// disarm); NoSpaceSteps the procedure's steps this agent took.
	NoSpaceAlarm *prometheus.GaugeVec // member
	NoSpaceFull  prometheus.Gauge
	NoSpaceSteps *prometheus.CounterVec // step
}

func newSpace() *Space {
	member := []string{"member"}
	s := &Space{
		DBSize:    prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "etcdkeeper_member_db_size_bytes", Help: "Size of each member's db file, as this agent last observed it (etcd's dbSize)."}, member),
		DBInUse:   prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "etcdkeeper_member_db_size_in_use_bytes", Help: "What the keys take in each member's db file (etcd's dbSizeInUse); the rest is free pages a defragmentation gives back."}, member),
		Quota:     prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "etcdkeeper_member_db_quota_bytes", Help: "Each member's quota-backend-bytes as it reports it: a db file that reaches it raises NOSPACE and the cluster refuses writes."}, member),
		FreeRatio: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "etcdkeeper_member_db_free_ratio", Help: "Fraction of each member's db file that is free: (dbSize - dbSizeInUse) / dbSize."}, member),
		DefragDue: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "etcdkeeper_member_defrag_due",
			Help: "1 while the spec's maintenance.defrag makes the member due for a defragmentation now (enabled, inside its window, minFreeRatio and minFreeBytes reached), else 0."}, member),
		DefragRuns: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "etcdkeeper_defrag_runs_total",
			Help: "Defragmentations this agent ran (of any member, as the cluster lock holder), by result: done, failed."}, []string{"result"}),
		DefragTime: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "etcdkeeper_defrag_duration_seconds",
			Help: "How long each defragmentation this agent ran took.", Buckets: []float64{0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600}}),
		DefragFreed: prometheus.NewCounter(prometheus.CounterOpts{Name: "etcdkeeper_defrag_freed_bytes_total", Help: "Bytes of db file the defragmentations this agent ran gave back."}),
	}
	s.NoSpaceAlarm = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "etcdkeeper_member_nospace_alarm",
		Help: "1 while etcd's NOSPACE alarm names the member (the cluster refuses writes), else 0; every member as this agent last observed it."}, member)
	s.NoSpaceFull = prometheus.NewGauge(prometheus.GaugeOpts{Name: "etcdkeeper_nospace_data_fills_quota",
		Help: "1 while NOSPACE is raised and a member's data in use fills 90 % of its quota: the agents do not disarm (it would trip again); raise quota-backend-bytes or delete data."})
	s.NoSpaceSteps = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "etcdkeeper_nospace_steps_total",
		Help: "Steps of the NOSPACE procedure this agent took, by step: compact, disarm, refused (a disarm refused: the data fills the quota), failed."}, []string{"step"})
	for _, r := range []string{"done", "failed"} {
		s.DefragRuns.WithLabelValues(r)
	}
	for _, st := range []string{"compact", "disarm", "refused", "failed"} {
		s.NoSpaceSteps.WithLabelValues(st)
	}
	return s
}

func (s *Space) collectors() []prometheus.Collector {
	return []prometheus.Collector{s.DBSize, s.DBInUse, s.Quota, s.FreeRatio, s.DefragDue, s.DefragRuns, s.DefragTime, s.DefragFreed,
		s.NoSpaceAlarm, s.NoSpaceFull, s.NoSpaceSteps}
}

// MemberSpace is one member's sizes, in bytes.
type MemberSpace struct {
	Name                 string
	DBSize, InUse, Quota int64
	// NoSpace: a NOSPACE alarm names it.
	NoSpace bool
	// DefragDue: the spec's maintenance.defrag makes it due now
	// (reconcile.DefragDue).
	DefragDue bool
}

// SetMembers replaces the members' gauges with those observed: a member
// that left the cluster leaves them too.
func (s *Space) SetMembers(ms []MemberSpace) {
	for _, g := range []*prometheus.GaugeVec{s.DBSize, s.DBInUse, s.Quota, s.FreeRatio, s.DefragDue, s.NoSpaceAlarm} {
		g.Reset()
	}
	for _, m := range ms {
		if m.Name != "" {
			alarm := 0.0
			if m.NoSpace {
				alarm = 1
			}
			s.NoSpaceAlarm.WithLabelValues(m.Name).Set(alarm)
		}
		if m.Name == "" || m.DBSize <= 0 {
			continue // unstarted, or no status answer
		}
		s.DBSize.WithLabelValues(m.Name).Set(float64(m.DBSize))
		s.DBInUse.WithLabelValues(m.Name).Set(float64(m.InUse))
		s.Quota.WithLabelValues(m.Name).Set(float64(m.Quota))
		s.FreeRatio.WithLabelValues(m.Name).Set(float64(max(0, m.DBSize-m.InUse)) / float64(m.DBSize))
		due := 0.0
		if m.DefragDue {
			due = 1
		}
		s.DefragDue.WithLabelValues(m.Name).Set(due)
	}
}

// DefragDone records one defragmentation: err nil, freed bytes given back.
func (s *Space) DefragDone(took time.Duration, freed int64, err error) {
	s.DefragTime.Observe(took.Seconds())
	if err != nil {
		s.DefragRuns.WithLabelValues("failed").Inc()
		return
	}
	s.DefragRuns.WithLabelValues("done").Inc()
	s.DefragFreed.Add(float64(max(0, freed)))
}

// Package metrics defines etcdkeeper's Prometheus metrics. Names follow
// Prometheus conventions: etcdkeeper_ prefix, _total for counters, base
// units (seconds, bytes).
package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/etcdkeeper/etcdkeeper/internal/certs"
)

// Metrics are one agent's metrics, registered in their own registry.
type Metrics struct {
	Registry *prometheus.Registry

	ReconcilePasses   prometheus.Counter
	ReconcileErrors   prometheus.Counter
	MembershipChanges *prometheus.CounterVec // kind
	Repairs           *prometheus.CounterVec // outcome: done, failed, refused
	Recoveries        *prometheus.CounterVec // outcome: done, refused, fence-ended
	EtcdRestarts      *prometheus.CounterVec // cause: the exit class
	PublishStalls     *prometheus.CounterVec // action: restarted, waited
	ConfigReloads     *prometheus.CounterVec // result: ok, failed
	AlarmsDisarmed    *prometheus.CounterVec // alarm: NOSPACE, CORRUPT
	// CertRenewals and CertRenewalFailures count this agent's renewals of
	// its host's certificates by role (client, peer, agent, ca for the CA
	// key itself, or the name of one of tls.renew.others).
	CertRenewals        *prometheus.CounterVec
	CertRenewalFailures *prometheus.CounterVec
	// HostTurns counts this agent's host turns by event (taken, ended,
	// released: another host's turn it released after
	// maintenance.hostTurnTimeout); HostTurnHeld is 1 while this host
	// holds the turn.
	HostTurns    *prometheus.CounterVec
	HostTurnHeld prometheus.Gauge
	// OOMKills counts the local etcd's deaths by the kernel's OOM killer.
	OOMKills       prometheus.Counter
	MemberHealthy  prometheus.Gauge
	MemberRole     *prometheus.GaugeVec // role: voter, learner, leader, none
	ClusterVoters  prometheus.Gauge
	ClusterHealthy prometheus.Gauge
	LastReconcile  prometheus.Gauge
	// StateDirWritable is 0 while a file of the state dir cannot be
	// written; RecoveryUnfinished 1 while the end of a recovery cannot be
	// recorded.
	StateDirWritable   prometheus.Gauge
	RecoveryUnfinished prometheus.Gauge
	Backup             *Backup
	Space              *Space
	Disk               *Disk
	Build              *Build

	mu        sync.Mutex
	lastGood  time.Time
	createdAt time.Time
	certs     *certCollector
}

// New creates and registers the metrics.
func New() *Metrics {
	m := &Metrics{Registry: prometheus.NewRegistry(), createdAt: time.Now()}
	m.ReconcilePasses = prometheus.NewCounter(prometheus.CounterOpts{Name: "etcdkeeper_reconcile_passes_total", Help: "Reconcile passes run."})
	m.ReconcileErrors = prometheus.NewCounter(prometheus.CounterOpts{Name: "etcdkeeper_reconcile_errors_total", Help: "Reconcile passes that ended in an error."})
	m.MembershipChanges = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "etcdkeeper_membership_changes_total", Help: "Membership changes made by this agent, by kind (add-learner, promote, remove, update-peer-urls, move-leader)."}, []string{"kind"})
	m.Repairs = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "etcdkeeper_repairs_total", Help: "Repairs (rejoins that replace unusable data) by outcome: done, failed, refused."}, []string{"outcome"})
	m.Recoveries = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "etcdkeeper_recoveries_total", Help: "This host's parts in recoveries from quorum loss (etcdkeeper recover --yes), by outcome: done, refused, fence-ended (a fence this agent called off: its cluster had a quorum)."}, []string{"outcome"})
	m.EtcdRestarts = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "etcdkeeper_etcd_restarts_total", Help: "Exits of the local etcd, by cause (the classified failure class)."}, []string{"cause"})
	m.PublishStalls = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "etcdkeeper_etcd_publish_stalls_total", Help: "Times the local etcd lost etcd's publish race (docs/etcd-publish-stall.md), by what the agent did: restarted (a joining learner), waited (the 7 s publish timeout: a voter, or agent.restartPublishStall off)."}, []string{"action"})
	m.ConfigReloads = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "etcdkeeper_config_reloads_total", Help: "Spec reloads by result: ok (applied) or failed (rejected, last good spec kept)."}, []string{"result"})
	m.AlarmsDisarmed = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "etcdkeeper_alarms_disarmed_total", Help: "Alarms this agent disarmed, by type: the CORRUPT alarm of a member that was repaired (or is being repaired) under a new ID."}, []string{"alarm"})
	m.CertRenewals = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "etcdkeeper_certificate_renewals_total", Help: "Certificates this agent renewed with tls.ca, by role (client, peer, agent, or a tls.renew.others name)."}, []string{"role"})
	m.CertRenewalFailures = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "etcdkeeper_certificate_renewal_failures_total", Help: "Failed renewals of a certificate due for renewal, by role (ca: the CA key on the host cannot be used); retried every 30s."}, []string{"role"})
	m.MemberHealthy = prometheus.NewGauge(prometheus.GaugeOpts{Name: "etcdkeeper_member_healthy", Help: "1 when the local member is a healthy voter."})
	m.MemberRole = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "etcdkeeper_member_role", Help: "1 for the local member's current role (leader, voter, learner, none)."}, []string{"role"})
	m.ClusterVoters = prometheus.NewGauge(prometheus.GaugeOpts{Name: "etcdkeeper_cluster_voters", Help: "Voting members in the cluster, as last observed."})
	m.ClusterHealthy = prometheus.NewGauge(prometheus.GaugeOpts{Name: "etcdkeeper_cluster_healthy_voters", Help: "Healthy voting members in the cluster, as last observed."})
	m.LastReconcile = prometheus.NewGauge(prometheus.GaugeOpts{Name: "etcdkeeper_last_successful_reconcile_timestamp_seconds", Help: "Unix time of the last reconcile pass without error."})
	m.StateDirWritable = prometheus.NewGauge(prometheus.GaugeOpts{Name: "etcdkeeper_state_dir_writable", Help: "0 while a file of the agent's state dir (marker, journals) cannot be written (full, read-only, immutable), 1 otherwise."})
	m.StateDirWritable.Set(1)
	m.RecoveryUnfinished = prometheus.NewGauge(prometheus.GaugeOpts{Name: "etcdkeeper_recovery_unfinished", Help: "1 while this host's part in a recovery from quorum loss is carried out but its end cannot be recorded (the recovery record or the journal write fails)."})
	m.certs = &certCollector{desc: prometheus.NewDesc("etcdkeeper_certificate_expiry_timestamp_seconds",
		"Unix time at which a certificate the member uses expires (the first to expire in a file that holds several), "+
			"read from its file at each scrape, by member, kind (client, peer, agent, ca) and path.",
		[]string{"member", "kind", "path"}, nil)}
	since := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "etcdkeeper_seconds_since_last_reconcile", Help: "Seconds since the last reconcile pass without error."}, m.sinceLastGood)
	m.HostTurns = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "etcdkeeper_host_turns_total", Help: "Host turns (etcdkeeper guard, maintenance start) by event: taken and ended by this host, released (another host's turn this agent released: its agent had not renewed it for maintenance.hostTurnTimeout)."}, []string{"event"})
	m.HostTurnHeld = prometheus.NewGauge(prometheus.GaugeOpts{Name: "etcdkeeper_host_turn_held", Help: "1 while this host holds the host turn (its reboot, patching or hand work under way), as last read."})
	for _, e := range []string{"taken", "ended", "released"} {
		m.HostTurns.WithLabelValues(e)
	}
	m.OOMKills = prometheus.NewCounter(prometheus.CounterOpts{Name: "etcdkeeper_etcd_oom_kills_total", Help: "Times the local etcd was killed by the kernel's OOM killer (SIGKILL, and its memory cgroup's oom_kill count rose); each is also an exit of cause resource."})
	m.Registry.MustRegister(m.CertRenewals, m.CertRenewalFailures, m.HostTurns, m.HostTurnHeld, m.OOMKills)
	m.Registry.MustRegister(m.ReconcilePasses, m.ReconcileErrors, m.MembershipChanges, m.Repairs, m.Recoveries, m.EtcdRestarts, m.PublishStalls, m.AlarmsDisarmed,
		m.ConfigReloads, m.MemberHealthy, m.MemberRole, m.ClusterVoters, m.ClusterHealthy, m.LastReconcile, m.StateDirWritable, m.RecoveryUnfinished, since, m.certs,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.Backup = newBackup()
	m.Registry.MustRegister(m.Backup.collectors()...)
	m.Space = newSpace()
	m.Registry.MustRegister(m.Space.collectors()...)
	m.Disk = newDisk()
	m.Registry.MustRegister(m.Disk.collectors()...)
	m.Build = newBuild()
	m.Registry.MustRegister(m.Build.collectors()...)
	for _, r := range []string{"ok", "failed"} {
		m.ConfigReloads.WithLabelValues(r)
	}
	for _, o := range []string{"restarted", "waited"} {
		m.PublishStalls.WithLabelValues(o)
	}
	for _, o := range []string{"done", "failed", "refused"} {
		m.Repairs.WithLabelValues(o)
	}
	for _, o := range []string{"done", "refused"} {
		m.Recoveries.WithLabelValues(o)
	}
	// Every label value an agent can count, at 0 from the start: a
	// counter's first sample is not an increase to Prometheus, so a series
	// born at its first event would hide that event from increase() and
	// rate() (the dashboard's membership and restart panels, the alerts).
	for _, k := range []string{"add-learner", "promote", "remove", "update-peer-urls", "move-leader"} {
		m.MembershipChanges.WithLabelValues(k)
	}
	for _, c := range []string{"none", "corrupt", "removed", "misconfig", "resource", "transient", "unknown"} {
		m.EtcdRestarts.WithLabelValues(c)
	}
	for _, a := range []string{"NOSPACE", "CORRUPT"} {
		m.AlarmsDisarmed.WithLabelValues(a)
	}
	m.SetRole("none")
	return m
}

// PassDone records a reconcile pass.
func (m *Metrics) PassDone(err error) {
	m.ReconcilePasses.Inc()
	if err != nil {
		m.ReconcileErrors.Inc()
		return
	}
	now := time.Now()
	m.mu.Lock()
	m.lastGood = now
	m.mu.Unlock()
	m.LastReconcile.Set(float64(now.UnixNano()) / 1e9)
}

// SinceLastGood is how long ago the last pass without error ran (since
// start when none has).
func (m *Metrics) SinceLastGood() time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lastGood.IsZero() {
		return time.Since(m.createdAt)
	}
	return time.Since(m.lastGood)
}

func (m *Metrics) sinceLastGood() float64 { return m.SinceLastGood().Seconds() }

// SetRole sets the role gauge: 1 for role, 0 for the others.
func (m *Metrics) SetRole(role string) {
	for _, r := range []string{"leader", "voter", "learner", "none"} {
		v := 0.0
		if r == role {
			v = 1
		}
		m.MemberRole.WithLabelValues(r).Set(v)
	}
}

// SetCertificates sets the certificate files of member whose expiry
// etcdkeeper_certificate_expiry_timestamp_seconds reports: the agent calls
// it at start and when a reloaded spec is applied. The files are read at
// each scrape, so a renewed certificate shows at once; one that cannot be
// read has no series (validate says why).
func (m *Metrics) SetCertificates(member string, files []certs.File) {
	m.certs.mu.Lock()
	defer m.certs.mu.Unlock()
	m.certs.member, m.certs.files = member, files
	for _, f := range files {
		m.CertRenewals.WithLabelValues(f.Kind)
		m.CertRenewalFailures.WithLabelValues(f.Kind)
	}
}

// certCollector reads the certificates' expiry when scraped.
type certCollector struct {
	desc   *prometheus.Desc
	mu     sync.Mutex
	member string
	files  []certs.File
}

func (c *certCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *certCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	member, files := c.member, c.files
	c.mu.Unlock()
	for _, e := range certs.Expiries(files) {
		if e.Err == nil {
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(e.NotAfter.Unix()), member, e.Kind, e.Path)
		}
	}
}

// SetHostTurn sets etcdkeeper_host_turn_held.
func (m *Metrics) SetHostTurn(held bool) {
	v := 0.0
	if held {
		v = 1
	}
	m.HostTurnHeld.Set(v)
}

package packaging

import (
	"net"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	// etcd's metrics: the member etcd is this binary's `etcdkeeper etcd`,
	// etcdmain; importing it registers the same metrics in the default
	// registry.
	_ "go.etcd.io/etcd/server/v3/etcdmain"

	"github.com/etcdkeeper/etcdkeeper/internal/certs"
	"github.com/etcdkeeper/etcdkeeper/internal/metrics"
	"github.com/etcdkeeper/etcdkeeper/internal/testpki"
	"github.com/etcdkeeper/etcdkeeper/test/dashboard"
)

// TestDashboardShape: the dashboard is one Grafana can import: a schema
// version, a Prometheus data source variable every query uses, the
// cluster and member variables, unique panel IDs and a grid that fits.
func TestDashboardShape(t *testing.T) {
	d := loadDashboard(t)
	if d.SchemaVersion < 36 {
		t.Errorf("schemaVersion %d: want a current one (39)", d.SchemaVersion)
	}
	vars := map[string]dashboard.Variable{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v
	}
	if ds := vars["datasource"]; ds.Type != "datasource" || ds.Query != "prometheus" {
		t.Errorf("variable datasource = %+v, want type datasource, query prometheus", ds)
	}
	for _, name := range []string{"cluster", "member"} {
		if _, _, err := vars[name].LabelValues(); err != nil || vars[name].Type != "query" {
			t.Errorf("variable %s: want a query variable label_values(METRIC, %s): %v", name, name, err)
		}
	}
	ids := map[int]string{}
	panels := d.Panels()
	if len(panels) == 0 {
		t.Fatal("no panels")
	}
	for _, p := range panels {
		if other, dup := ids[p.ID]; dup {
			t.Errorf("panels %q and %q share id %d", other, p.Title, p.ID)
		}
		ids[p.ID] = p.Title
		g := p.GridPos
		if g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 {
			t.Errorf("panel %q: gridPos %+v does not fit the 24 columns", p.Title, g)
		}
		if p.Title == "" || p.Description == "" {
			t.Errorf("panel %d: needs a title and a description (what it shows, which alert goes with it)", p.ID)
		}
		if p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: datasource %+v, want uid ${datasource}", p.Title, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		refs := map[string]bool{}
		for _, q := range p.Targets {
			if q.Expr == "" || q.RefID == "" || refs[q.RefID] || q.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q: target %+v needs an expr, a unique refId and the ${datasource}", p.Title, q)
			}
			refs[q.RefID] = true
		}
	}
}

// TestDashboardMetricsExported: every expression of every panel and
// variable names only metrics that are exported, by the agent (gathered
// from internal/metrics as the agent registers them) or by its etcd
// (etcd's own registrations), or Prometheus' up; and each selects
// cluster="$cluster", so that one Prometheus can hold several clusters.
// A renamed metric fails here before any Prometheus runs.
func TestDashboardMetricsExported(t *testing.T) {
	exported := agentExported(t)
	agentCount := len(exported)
	for name := range etcdExported(t) {
		exported[name] = true
	}
	exported["up"] = true
	t.Logf("%d metric names known: %d the agent's, the rest etcd's and up", len(exported), agentCount)
	for _, m := range agentMetrics {
		if !exported[m] {
			t.Errorf("TestAlertsShape's list names %s, which the agent does not export", m)
		}
	}
	d := loadDashboard(t)
	check := func(where, expr string) {
		sels := dashboard.Selectors(expr)
		if len(sels) == 0 {
			t.Errorf("%s: %q selects no metric", where, expr)
		}
		for _, s := range sels {
			if !known(exported, s.Metric) {
				t.Errorf("%s: %s is exported by neither the agent nor etcd (%s)", where, s.Metric, expr)
			}
			if !strings.Contains(s.Matchers, `cluster="$cluster"`) && !strings.HasPrefix(where, "variable cluster") {
				t.Errorf("%s: %s{%s} does not select cluster=\"$cluster\"", where, s.Metric, s.Matchers)
			}
		}
	}
	for _, p := range d.Panels() {
		for _, q := range p.Targets {
			check("panel "+p.Title+" "+q.RefID, q.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if v.Type == "query" {
			metric, _, err := v.LabelValues()
			if err != nil {
				t.Errorf("variable %s: %v", v.Name, err)
				continue
			}
			check("variable "+v.Name, metric)
		}
	}
}

// known: name is exported, or is a histogram's or summary's series.
func known(exported map[string]bool, name string) bool {
	if exported[name] {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && exported[base] {
			return true
		}
	}
	return false
}

func loadDashboard(t *testing.T) *dashboard.Dashboard {
	t.Helper()
	d, err := dashboard.Load(packagingFile(t, filepath.Join("grafana", "etcdkeeper.json")))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// agentExported is every metric name the agent's registry can serve: what
// it gathers once set up as the agent sets it up (with a certificate, so
// the expiry has a series), and what each collector of metrics.Metrics
// describes (a labelled counter has no series before its first event).
func agentExported(t *testing.T) map[string]bool {
	m := metrics.New()
	m.WatchFenceStale(func() bool { return false })
	dir := t.TempDir()
	testpki.NewCA(t, "ca").Issue(t, "node1", net.IPv4(127, 0, 0, 1)).Write(t, dir, "node1")
	m.SetCertificates("node1", []certs.File{{Kind: "client", Path: filepath.Join(dir, "node1.crt")}})
	names := gathered(t, m.Registry)
	if !names["etcdkeeper_certificate_expiry_timestamp_seconds"] {
		t.Fatal("the certificate expiry has no series for a readable certificate")
	}
	described(reflect.ValueOf(m), names)
	return names
}

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// described adds the names of the collectors in v's exported fields,
// following pointers to structs (Metrics.Backup).
func described(v reflect.Value, names map[string]bool) {
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return
		}
		v = v.Elem()
	}
	for i := 0; i < v.NumField(); i++ {
		if !v.Type().Field(i).IsExported() {
			continue
		}
		f := v.Field(i)
		if c, ok := f.Interface().(prometheus.Collector); ok {
			ch := make(chan *prometheus.Desc, 16)
			go func() { c.Describe(ch); close(ch) }()
			for d := range ch {
				if m := fqName.FindStringSubmatch(d.String()); m != nil {
					names[m[1]] = true
				}
			}
			continue
		}
		if f.Kind() == reflect.Pointer && f.Elem().Kind() == reflect.Struct {
			described(f, names)
		}
	}
}

// etcdExported is what etcd registers in the default registry. Labelled
// metrics without a series yet are missing: the dashboard does not use
// those (the integration test queries a real etcd).
func etcdExported(t *testing.T) map[string]bool {
	names := map[string]bool{}
	for n := range gathered(t, prometheus.DefaultGatherer) {
		if strings.HasPrefix(n, "etcd_") {
			names[n] = true
		}
	}
	if !names["etcd_server_has_leader"] {
		t.Fatal("etcd's metrics are not registered: etcd_server_has_leader missing")
	}
	return names
}

func gathered(t *testing.T, g prometheus.Gatherer) map[string]bool {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
	}
	return names
}

package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/etcdkeeper/etcdkeeper/test/dashboard"
	"github.com/etcdkeeper/etcdkeeper/test/testbed"
)

// TestDashboard runs Debian's prometheus against a real three-member TLS
// cluster (each agent's /metrics, each etcd's /metrics on its client URL)
// with packaging/alerts.yml as its rule file. The rules load and
// evaluate; a corrupt-WAL repair shows in the Repairs panel's query; then
// every query of every panel of packaging/grafana/etcdkeeper.json, and
// each template variable, returns data.
func TestDashboard(t *testing.T) {
	promBin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skip("prometheus not found: install the Debian package prometheus (apt-get install prometheus; .ci/run does)")
	}
	t.Parallel()
	began := time.Now()
	d, err := dashboard.Load(filepath.Join("..", "..", "packaging", "grafana", "etcdkeeper.json"))
	if err != nil {
		t.Fatal(err)
	}
	// Scheduled snapshots on, so that the backup panels show a real one.
	c, pki, ids := startTLSCluster(t, "backup:\n  interval: 1h\n")
	prom := startPrometheus(t, promBin, c, pki)
	for _, m := range c.Members {
		for _, job := range []string{"etcdkeeper", "etcd"} {
			waitScraped(t, prom, job, m.Name, 5)
		}
	}
	t.Logf("prometheus has scraped every agent and etcd 5 times: %s after the start", time.Since(began).Round(time.Second))
	checkRules(t, prom)
	// On a healthy cluster, no rule fires.
	var alerts struct {
		Alerts []struct {
			Labels map[string]string
			State  string
		}
	}
	prom.get(t, "/api/v1/alerts", nil, &alerts)
	for _, a := range alerts.Alerts {
		if a.State == "firing" {
			t.Errorf("alert %s fires on a healthy cluster: %v", a.Labels["alertname"], a.Labels)
		} else {
			t.Logf("alert %s %s: %v", a.Labels["alertname"], a.State, a.Labels)
		}
	}

	repairs := panelQuery(t, d, "Repairs", "A")
	if v, ok := prom.value(t, repairs, "node3", "done"); ok && v > 0 {
		t.Fatalf("the Repairs panel shows a repair of node3 before there was one: %v", v)
	}
	// A damaged WAL under a running member, whose etcd then dies: the
	// restart finds the corruption and the agent repairs it.
	pid := c.EtcdPID("node3")
	corrupted := time.Now()
	c.CorruptWAL("node3")
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	after := c.WaitVoters(converge, c.AllNames()...)
	if after["node3"] == ids["node3"] {
		t.Fatalf("node3 kept member ID %x: no repair", ids["node3"])
	}
	testbed.Eventually(t, 30*time.Second, "the Repairs panel shows node3's repair", func() string {
		if v, ok := prom.value(t, repairs, "node3", "done"); !ok || v <= 0 {
			return fmt.Sprintf("node3 done = %v (series found: %v)", v, ok)
		}
		return ""
	})
	v, _ := prom.value(t, repairs, "node3", "done")
	t.Logf("the Repairs panel shows node3's repair (done: %.2f in 1m) %s after the corruption", v, time.Since(corrupted).Round(time.Second))

	for _, p := range d.Panels() {
		for _, q := range p.Targets {
			expr := substitute(q.Expr)
			res := prom.query(t, expr)
			if len(res) == 0 {
				t.Errorf("panel %q, query %s returns no data: %s", p.Title, q.RefID, expr)
				continue
			}
			t.Logf("panel %q %s: %d series, e.g. %s", p.Title, q.RefID, len(res), res[0])
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		sel, label, err := v.LabelValues()
		if err != nil {
			t.Fatal(err)
		}
		got := prom.labelValues(t, label, substitute(sel))
		want := []string{"itest"}
		if label == "member" {
			want = c.AllNames()
		}
		if !slices.Equal(got, want) {
			t.Errorf("variable %s (%s) = %v, want %v", v.Name, v.Query, got, want)
		}
	}
	t.Logf("dashboard test: %s in all", time.Since(began).Round(time.Second))
}

// substitute puts the test cluster's values and Grafana's intervals in
// for the dashboard's variables, as Grafana does (a multi-value variable
// becomes a regex alternation).
func substitute(expr string) string {
	return strings.NewReplacer(
		"$__rate_interval", "1m",
		"$__interval", "15s",
		"$__range", "10m",
		"$cluster", "itest",
		"$member", "node1|node2|node3",
	).Replace(expr)
}

func panelQuery(t *testing.T, d *dashboard.Dashboard, title, ref string) string {
	t.Helper()
	for _, p := range d.Panels() {
		for _, q := range p.Targets {
			if p.Title == title && q.RefID == ref {
				return substitute(q.Expr)
			}
		}
	}
	t.Fatalf("the dashboard has no panel %q with query %s", title, ref)
	return ""
}

// prometheus is a running Prometheus server of the test.
type prometheus struct {
	base string
	http *http.Client
}

// startPrometheus runs promBin on a free port of 127.0.0.1 with its data
// in a temp dir, scraping every agent and every etcd of c each second,
// the targets labelled cluster and member as docs/metrics.md says; it is
// stopped when the test ends.
func startPrometheus(t *testing.T, promBin string, c *testbed.Cluster, pki *clusterPKI) *prometheus {
	t.Helper()
	dir := t.TempDir()
	rules, err := filepath.Abs(filepath.Join("..", "..", "packaging", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	targets := func(port func(testbed.Member) int) []map[string]any {
		var out []map[string]any
		for _, m := range c.Members {
			out = append(out, map[string]any{
				"targets": []string{fmt.Sprintf("%s:%d", m.IP, port(m))},
				"labels":  map[string]string{"cluster": "itest", "member": m.Name},
			})
		}
		return out
	}
	cfg := map[string]any{
		"global":     map[string]any{"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
		"rule_files": []string{rules},
		"scrape_configs": []map[string]any{
			{"job_name": "etcdkeeper", "static_configs": targets(func(m testbed.Member) int { return m.AgentPort })},
			{"job_name": "etcd", "scheme": "https",
				"tls_config": map[string]string{
					"ca_file":   filepath.Join(pki.dir, "ca.crt"),
					"cert_file": filepath.Join(pki.dir, "client.crt"),
					"key_file":  filepath.Join(pki.dir, "client.key"),
				},
				"static_configs": targets(func(m testbed.Member) int { return m.ClientPort })},
		},
	}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", testbed.FreePort(t, "127.0.0.1"))
	logPath := filepath.Join(dir, "prometheus.log")
	p, err := testbed.StartProcess(logPath, nil, promBin,
		"--config.file="+cfgPath,
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr,
		"--log.level=warn")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if killed, _ := p.Stop(10 * time.Second); killed {
			t.Errorf("prometheus did not stop within 10s of SIGTERM")
		}
		if t.Failed() {
			if b, err := os.ReadFile(logPath); err == nil {
				t.Logf("prometheus log:\n%s", b)
			}
		}
	})
	prom := &prometheus{base: "http://" + addr, http: &http.Client{Timeout: 5 * time.Second}}
	testbed.Eventually(t, 30*time.Second, "prometheus is ready", func() string {
		if !p.Running() {
			b, _ := os.ReadFile(logPath)
			t.Fatalf("prometheus exited:\n%s", b)
		}
		resp, err := prom.http.Get(prom.base + "/-/ready")
		if err != nil {
			return err.Error()
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return resp.Status
		}
		return ""
	})
	return prom
}

// waitScraped waits until job's target of member has been scraped, and
// answered, at least n times.
func waitScraped(t *testing.T, prom *prometheus, job, member string, n int) {
	t.Helper()
	expr := fmt.Sprintf(`sum_over_time(up{job=%q, member=%q}[1m])`, job, member)
	testbed.Eventually(t, converge, fmt.Sprintf("%s of %s scraped %d times", job, member, n), func() string {
		res := prom.query(t, expr)
		if len(res) == 0 {
			return "not scraped yet"
		}
		if res[0].Value < float64(n) {
			return fmt.Sprintf("%v successful scrapes", res[0].Value)
		}
		return ""
	})
}

// checkRules: the rule file loaded as one group holding every rule of
// alerts.yml, and each rule has been evaluated without an error.
func checkRules(t *testing.T, prom *prometheus) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "packaging", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Name  string
			Rules []struct{ Alert string }
		}
	}
	if err := yaml.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{}
	for _, g := range file.Groups {
		want[g.Name] = len(g.Rules)
	}
	testbed.Eventually(t, 30*time.Second, "every rule of alerts.yml evaluated in prometheus", func() string {
		var data struct {
			Groups []struct {
				Name           string
				LastEvaluation time.Time
				Rules          []struct {
					Name, Health, LastError string
					LastEvaluation          time.Time
				}
			}
		}
		prom.get(t, "/api/v1/rules", nil, &data)
		got := map[string]int{}
		for _, g := range data.Groups {
			for _, r := range g.Rules {
				if r.LastEvaluation.IsZero() {
					return fmt.Sprintf("rule %s not evaluated yet", r.Name)
				}
				if r.Health != "ok" || r.LastError != "" {
					t.Fatalf("rule %s of group %s: health %q, error %q", r.Name, g.Name, r.Health, r.LastError)
				}
			}
			got[g.Name] = len(g.Rules)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Sprintf("groups and rule counts %v, want %v", got, want)
		}
		return ""
	})
}

// sample is one series of an instant query's result.
type sample struct {
	Metric map[string]string
	Value  float64
}

func (s sample) String() string {
	keys := make([]string, 0, len(s.Metric))
	for k := range s.Metric {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var l []string
	for _, k := range keys {
		l = append(l, k+"="+s.Metric[k])
	}
	return fmt.Sprintf("{%s} %g", strings.Join(l, ","), s.Value)
}

// query runs an instant query; a query Prometheus refuses fails the test.
func (p *prometheus) query(t *testing.T, expr string) []sample {
	t.Helper()
	var data struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	p.get(t, "/api/v1/query", url.Values{"query": {expr}}, &data)
	if data.ResultType != "vector" {
		t.Fatalf("query %s: result type %s, want vector", expr, data.ResultType)
	}
	var raw []struct {
		Metric map[string]string `json:"metric"`
		Value  [2]any            `json:"value"`
	}
	if err := json.Unmarshal(data.Result, &raw); err != nil {
		t.Fatalf("query %s: %v", expr, err)
	}
	out := make([]sample, 0, len(raw))
	for _, r := range raw {
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("query %s: value %v: %v", expr, r.Value, err)
		}
		out = append(out, sample{Metric: r.Metric, Value: v})
	}
	return out
}

// value is the value of expr's series for member and outcome.
func (p *prometheus) value(t *testing.T, expr, member, outcome string) (float64, bool) {
	t.Helper()
	for _, s := range p.query(t, expr) {
		if s.Metric["member"] == member && s.Metric["outcome"] == outcome {
			return s.Value, true
		}
	}
	return 0, false
}

// labelValues is what Grafana's label_values(selector, label) asks.
func (p *prometheus) labelValues(t *testing.T, label, selector string) []string {
	t.Helper()
	var out []string
	p.get(t, "/api/v1/label/"+label+"/values", url.Values{"match[]": {selector}}, &out)
	sort.Strings(out)
	return out
}

// get calls Prometheus' HTTP API and decodes its data into v.
func (p *prometheus) get(t *testing.T, path string, q url.Values, v any) {
	t.Helper()
	u := p.base + path
	if q != nil {
		u += "?" + q.Encode()
	}
	resp, err := p.http.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	var body struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("GET %s: %s: %v", u, resp.Status, err)
	}
	if body.Status != "success" {
		t.Fatalf("GET %s: %s: %s", u, resp.Status, body.Error)
	}
	if err := json.Unmarshal(body.Data, v); err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
}

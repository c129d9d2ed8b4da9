package packaging

import (
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// The metrics the agent exports (internal/metrics); the alert rules may use
// these and Prometheus' own `up`, nothing else.
var agentMetrics = []string{
	"etcdkeeper_restore_drill_last_failed",
	"etcdkeeper_restore_drill_seconds",
	"etcdkeeper_backup_plaintext_unacknowledged",
	"etcdkeeper_member_healthy",
	"etcdkeeper_repairs_total",
	"etcdkeeper_cluster_healthy_voters",
	"etcdkeeper_cluster_voters",
	"etcdkeeper_config_reloads_total",
	"etcdkeeper_seconds_since_last_reconcile",
	"etcdkeeper_etcd_restarts_total",
	"etcdkeeper_backup_last_success_timestamp_seconds",
	"etcdkeeper_backup_interval_seconds",
	"etcdkeeper_backup_restore_checks_total",
	"etcdkeeper_certificate_expiry_timestamp_seconds",
	"etcdkeeper_certificate_renewal_failures_total",
	"etcdkeeper_state_dir_writable",
	"etcdkeeper_recovery_unfinished",
	"etcdkeeper_recovery_fence_stale",
	"etcdkeeper_member_db_size_bytes",
	"etcdkeeper_member_db_quota_bytes",
	"etcdkeeper_member_defrag_due",
	"etcdkeeper_defrag_runs_total",
	"etcdkeeper_member_nospace_alarm",
	"etcdkeeper_nospace_data_fills_quota",
	"etcdkeeper_upgrade_pending",
	"etcdkeeper_host_turns_total",
	"etcdkeeper_host_turn_held",
	"etcdkeeper_etcd_oom_kills_total",
	"etcdkeeper_member_disk_slow",
}

var wantAlerts = []string{
	"EtcdkeeperMemberUnhealthy",
	"EtcdkeeperRepairFailed",
	"EtcdkeeperRepairRefused",
	"EtcdkeeperQuorumAtRisk",
	"EtcdkeeperConfigReloadFailing",
	"EtcdkeeperLoopStalled",
	"EtcdkeeperCertificateRenewalFailing",
	"EtcdkeeperEtcdCrashLooping",
	"EtcdkeeperBackupStale",
	"EtcdkeeperBackupRestoreCheckFailed",
	"EtcdkeeperCertificateExpiresSoon",
	"EtcdkeeperStateDirNotWritable",
	"EtcdkeeperRecoveryUnfinished",
	"EtcdkeeperRecoveryFenceStale",
	"EtcdkeeperDBNearQuota",
	"EtcdkeeperDBFragmented",
	"EtcdkeeperDefragFailed",
	"EtcdkeeperNoSpace",
	"EtcdkeeperNoSpaceDataFillsQuota",
	"EtcdkeeperUpgradeStuck",
	"EtcdkeeperHostTurnReleased",
	"EtcdkeeperHostTurnHeldLong",
	"EtcdkeeperEtcdOOMKilled",
	"EtcdkeeperMemberDiskSlow",
}

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// TestAlertsShape parses the rules without promtool: every wanted alert is
// there with a severity and a summary, and the expressions use only the
// agent's metric names, each of them at least once.
func TestAlertsShape(t *testing.T) {
	var f ruleFile
	dec := yaml.NewDecoder(strings.NewReader(readFile(t, packagingFile(t, "alerts.yml"))))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("alerts.yml: %v", err)
	}
	metricName := regexp.MustCompile(`\b(etcdkeeper_[a-z_]+)\b`)
	var names []string
	used := map[string]bool{}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			names = append(names, r.Alert)
			if r.Expr == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
				t.Errorf("alert %q: needs an expr, a severity label and a summary", r.Alert)
			}
			for _, m := range metricName.FindAllString(r.Expr, -1) {
				if !slices.Contains(agentMetrics, m) {
					t.Errorf("alert %q uses %s, which the agent does not export", r.Alert, m)
				}
				used[m] = true
			}
		}
	}
	for _, a := range wantAlerts {
		if !slices.Contains(names, a) {
			t.Errorf("alert %s missing", a)
		}
	}
	for _, m := range agentMetrics {
		if !used[m] {
			t.Errorf("no alert uses %s", m)
		}
	}
}

// TestAlertRules checks the rules with promtool and runs their unit tests
// (testdata/alerts_test.yml: which alerts fire on which series).
func TestAlertRules(t *testing.T) {
	promtool := need(t, "promtool", "prometheus")
	t.Log(strings.TrimSpace(run(t, "", nil, promtool, "check", "rules", packagingFile(t, "alerts.yml"))))
	abs, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	t.Log(strings.TrimSpace(run(t, abs, nil, promtool, "test", "rules", "alerts_test.yml")))
}

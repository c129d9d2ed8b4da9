package packaging

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

const unitName = "etcdkeeper.service"

// maxExposure is the highest `systemd-analyze security` score we accept
// (0 = fully locked down, 10 = unprotected; the unit scored 1.6 when
// written).
const maxExposure = 2.5

// TestUnitVerifies runs `systemd-analyze verify` on the unit. verify
// refuses a unit whose ExecStart binary does not exist, so it checks a
// copy whose ExecStart points at an executable stand-in; everything else
// is the packaged file byte for byte. verify exits 0 even on unknown keys
// or unparsable values (it only prints them), so any line it prints about
// the unit fails the test.
func TestUnitVerifies(t *testing.T) {
	stub := filepath.Join(t.TempDir(), "etcdkeeper")
	if err := os.WriteFile(stub, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	verifyUnit(t, readFile(t, packagingFile(t, unitName)), stub)
}

// verifyUnit runs systemd-analyze verify on unit with ExecStart's
// /usr/bin/etcdkeeper replaced by bin.
func verifyUnit(t *testing.T, unit, bin string) {
	t.Helper()
	analyze := need(t, "systemd-analyze", "systemd")
	const packaged = "\nExecStart=/usr/bin/etcdkeeper "
	if n := strings.Count(unit, packaged); n != 1 {
		t.Fatalf("want exactly one %q line in the unit, found %d", packaged[1:], n)
	}
	copyPath := filepath.Join(t.TempDir(), unitName)
	unit = strings.Replace(unit, packaged, "\nExecStart="+bin+" ", 1)
	if err := os.WriteFile(copyPath, []byte(unit), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runErr("", nil, analyze, "verify", "--man=no", copyPath)
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.Contains(line, unitName) || strings.Contains(line, copyPath) {
			t.Errorf("systemd-analyze verify: %s", line)
		} else if line != "" {
			t.Logf("systemd-analyze verify (not about our unit): %s", line)
		}
	}
	if err != nil {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// TestUnitSecurityScore checks the unit's hardening with systemd's own
// rating, offline (no running systemd needed).
func TestUnitSecurityScore(t *testing.T) {
	analyze := need(t, "systemd-analyze", "systemd")
	out, err := runErr("", nil, analyze, "security", "--offline=yes", "--no-pager", packagingFile(t, unitName))
	if err != nil && strings.Contains(out, "offline") {
		t.Skipf("this systemd-analyze has no --offline (needs systemd >= 250): %s", out)
	}
	m := regexp.MustCompile(`Overall exposure level for ` + regexp.QuoteMeta(unitName) + `: ([0-9.]+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no exposure level in systemd-analyze security output (err %v):\n%s", err, out)
	}
	score, perr := strconv.ParseFloat(m[1], 64)
	if perr != nil {
		t.Fatalf("exposure level %q: %v", m[1], perr)
	}
	t.Logf("systemd-analyze security: exposure %.1f (at most %.1f accepted)", score, maxExposure)
	if score > maxExposure {
		t.Errorf("exposure %.1f > %.1f; what systemd counts against the unit:\n%s", score, maxExposure, failedChecks(out))
	}
}

// failedChecks keeps the ✗ lines of systemd-analyze security's table.
func failedChecks(out string) string {
	var b strings.Builder
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "✗") {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// TestUnitDecisions pins the choices packaging/README.md explains, so a
// change to one of them is a deliberate change to the README too.
func TestUnitDecisions(t *testing.T) {
	service := unitSection(t, readFile(t, packagingFile(t, unitName)), "Service")
	want := map[string]string{
		"Type":             "notify",
		"NotifyAccess":     "main",
		"WatchdogSec":      "30s",
		"Restart":          "on-failure",
		"RestartSec":       "5s",
		"ExecStart":        "/usr/bin/etcdkeeper run --config /etc/etcdkeeper/cluster.yaml",
		"KillMode":         "mixed",
		"TimeoutStopSec":   "60s",
		"TimeoutStartSec":  "120s",
		"LimitNOFILE":      "65536",
		"User":             "etcd",
		"Group":            "etcd",
		"StateDirectory":   "etcdkeeper etcd",
		"UMask":            "0077",
		"ProtectSystem":    "strict",
		"NoNewPrivileges":  "yes",
		"SystemCallFilter": "@system-service",
		"Environment":      "ETCDKEEPER_BOOT_ID=%b",
	}
	for key, value := range want {
		if got := service[key]; len(got) != 1 || got[0] != value {
			t.Errorf("%s=%v, want %s=%s", key, got, key, value)
		}
	}
	// The reload must not need procps (/bin/kill), which the package
	// does not depend on.
	for _, r := range service["ExecReload"] {
		if strings.Contains(r, "/bin/kill") || strings.Contains(r, "/usr/bin/kill") {
			t.Errorf("ExecReload=%s needs procps; the package does not depend on it", r)
		}
	}
	// The data dirs belong under StateDirectory=etcd; each ReadWritePaths=
	// entry would be a mount of its own (ProtectSystem=strict), across
	// which a repair's rename of a data dir fails. The one entry is the
	// certificates' dir: a renewal renames a file within it.
	if paths := service["ReadWritePaths"]; !slices.Equal(paths, []string{"-/etc/etcdkeeper/pki"}) {
		t.Errorf("ReadWritePaths=%v, want only -/etc/etcdkeeper/pki: each is a mount of its own under ProtectSystem=strict; keep data and backups under StateDirectory=etcd", paths)
	}
	if _, ok := service["PrivateNetwork"]; ok {
		t.Error("PrivateNetwork would cut etcd off from its peers")
	}
}

// TestUnitDirectivesSayWhy: every directive in [Unit] and [Service] comes
// right after a comment that says why, or shares one with at most one
// neighbour (User= and Group=). Description= and Documentation= say it
// themselves.
func TestUnitDirectivesSayWhy(t *testing.T) {
	section, sinceComment := "", 0
	sc := bufio.NewScanner(strings.NewReader(readFile(t, packagingFile(t, unitName))))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "":
			sinceComment = 99
		case strings.HasPrefix(line, "#"):
			sinceComment = 0
		case strings.HasPrefix(line, "["):
			section, sinceComment = line, 99
		case strings.HasPrefix(line, "Description=") || strings.HasPrefix(line, "Documentation="):
		default:
			sinceComment++
			if section != "[Install]" && sinceComment > 2 {
				t.Errorf("%s:%d: %q has no comment saying why", unitName, n, line)
			}
		}
	}
}

// unitSection returns a section's directives, key -> values in order.
func unitSection(t *testing.T, unit, name string) map[string][]string {
	t.Helper()
	out, in := map[string][]string{}, false
	for _, line := range strings.Split(unit, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "[") {
			in = line == "["+name+"]"
			continue
		}
		if !in || line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("not a directive in [%s]: %q", name, line)
		}
		out[key] = append(out[key], value)
	}
	return out
}

// TestRebootUnitsVerify: etcdkeeper-reboot.path and .service pass
// systemd-analyze verify, and the service reboots through the guard, so
// that the hosts take their reboots in turns (docs/hosts.md).
func TestRebootUnitsVerify(t *testing.T) {
	analyze := need(t, "systemd-analyze", "systemd")
	dir := t.TempDir()
	bin, err := filepath.Abs(filepath.Join("..", "..", "bin", "etcdkeeper"))
	if err != nil {
		t.Fatal(err)
	}
	svc := readFile(t, packagingFile(t, "systemd/etcdkeeper-reboot.service"))
	const guarded = "\nExecStart=/usr/bin/etcdkeeper guard --config /etc/etcdkeeper/cluster.yaml -- /bin/systemctl reboot\n"
	if !strings.Contains(svc, guarded) {
		t.Fatalf("etcdkeeper-reboot.service does not reboot through the guard (want %q)", strings.TrimSpace(guarded))
	}
	if _, err := os.Stat(bin); err == nil {
		svc = strings.Replace(svc, "\nExecStart=/usr/bin/etcdkeeper ", "\nExecStart="+bin+" ", 1)
	}
	for name, text := range map[string]string{"etcdkeeper-reboot.service": svc, "etcdkeeper-reboot.path": readFile(t, packagingFile(t, "systemd/etcdkeeper-reboot.path"))} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := runErr(dir, nil, analyze, "verify", "--man=no", filepath.Join(dir, "etcdkeeper-reboot.path"), filepath.Join(dir, "etcdkeeper-reboot.service"))
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.Contains(line, "etcdkeeper-reboot") {
			t.Errorf("systemd-analyze verify: %s", line)
		} else if line != "" {
			t.Logf("systemd-analyze verify (not about our units): %s", line)
		}
	}
	if err != nil && t.Failed() {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// TestRebootUnitsDoNotLoop: a path unit starts its service again each
// time the service stops, inactive or failed, while the path exists
// (systemd's path_trigger_notify); /run/reboot-required stays until the
// reboot. So a guard that fails (the agent cannot be asked, the reboot
// refused) must not leave etcdkeeper-reboot.service stopped, or the path
// unit asks for a turn again at once, over and over, until the service's
// start limit stops the path unit for good. The service waits in
// auto-restart (activating, which the path unit leaves alone) and tries
// again minutes later; a guard that returned without a shutdown keeps it
// active (RemainAfterExit) until the next boot.
func TestRebootUnitsDoNotLoop(t *testing.T) {
	svc := unitSection(t, readFile(t, packagingFile(t, "systemd/etcdkeeper-reboot.service")), "Service")
	if got := svc["Restart"]; !slices.Equal(got, []string{"on-failure"}) {
		t.Errorf("Restart=%v, want on-failure: a failed guard leaves the service stopped and the path unit starts it again at once", got)
	}
	if got := svc["RemainAfterExit"]; !slices.Equal(got, []string{"yes"}) {
		t.Errorf("RemainAfterExit=%v, want yes: a guard that returned without a shutdown leaves the service stopped and the path unit starts it again at once", got)
	}
	rs := svc["RestartSec"]
	if len(rs) != 1 {
		t.Fatalf("RestartSec=%v, want one of minutes", rs)
	}
	d, err := time.ParseDuration(strings.NewReplacer("min", "m").Replace(rs[0]))
	if err != nil || d < 5*time.Minute {
		t.Errorf("RestartSec=%s, want 5min or more: each start of the guard asks for a turn (a leader hand-off, the other hosts held)", rs[0])
	}
	path := unitSection(t, readFile(t, packagingFile(t, "systemd/etcdkeeper-reboot.path")), "Path")
	if got := path["Unit"]; !slices.Equal(got, []string{"etcdkeeper-reboot.service"}) {
		t.Errorf("the path unit starts %v, want etcdkeeper-reboot.service", got)
	}
}

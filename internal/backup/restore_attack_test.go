package backup

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkeeper/etcdkeeper/internal/testetcd"
)

// attacker is what another local user (uid 65534) runs while the restore
// check runs: it polls the kernel's TCP listener tables, and sends every
// listener that was not there when it started a range over all keys,
// printing what it saw and what it read. It stops after $SECONDS_MAX.
const attacker = `
ports() { awk 'NR>1 && $4=="0A" {split($2,a,":"); print a[2]}' /proc/net/tcp /proc/net/tcp6 2>/dev/null | sort -u; }
base=$(ports | tr "\n" " ")
echo ready
end=$(( $(date +%s) + SECONDS_MAX ))
seen=""
while [ "$(date +%s)" -lt "$end" ]; do
  for hex in $(ports); do
    case " $base $seen " in *" $hex "*) continue;; esac
    seen="$seen $hex"
    port=$((0x$hex))
    echo "LISTENER $port"
    body=$(curl -s -m 3 -X POST "http://127.0.0.1:$port/v3/kv/range" -d '{"key":"AA==","range_end":"AA=="}' | tr -d '\n')
    echo "READ $port $body"
  done
  sleep 0.01
done
echo end
`

// TestRestoreCheckExposesNothing runs real restore checks of a snapshot
// holding a secret while another local user (uid 65534, through setpriv)
// looks for new TCP listeners and asks each for every key, and while the
// test itself watches for TCP listeners of its own process: the check
// must open none, so no secret can be read. The scratch dir it restores
// into is 0700.
func TestRestoreCheckExposesNothing(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run the attacker as uid 65534")
	}
	for _, tool := range []string{"setpriv", "curl", "awk"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s", tool)
		}
	}
	ep, _ := testetcd.Start(t)
	const secret = "s3cret-db-password-0c1d"
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := cli.Put(ctx, "/registry/secrets/default/db-password", secret); err != nil {
		t.Fatal(err)
	}
	_ = cli.Close()
	fill(t, ep, 200, 100)
	dir := filepath.Join(t.TempDir(), "backups")
	e, err := (&Taker{Client: dial(t, ep), Cluster: "c1", Member: "a", Dir: dir, By: BySchedule}).Take(ctx)
	if err != nil {
		t.Fatal(err)
	}

	before := ownListeners(t)
	script := strings.ReplaceAll(attacker, "SECONDS_MAX", "120")
	cmd := exec.CommandContext(ctx, "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c", script)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	// Everything the attacker prints, as it prints it (never blocking it).
	var outMu sync.Mutex
	var got []string
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for sc.Scan() {
			if sc.Text() == "ready" {
				close(ready)
				continue
			}
			outMu.Lock()
			got = append(got, sc.Text())
			outMu.Unlock()
		}
	}()
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		t.Fatal("the attacker did not start")
	}

	// Our own watch: TCP listeners of this process, by socket inode.
	var mu sync.Mutex
	var opened []string
	watchCtx, stopWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for watchCtx.Err() == nil {
			for ino, addr := range ownListeners(t) {
				if _, ok := before[ino]; !ok {
					mu.Lock()
					opened = append(opened, addr)
					mu.Unlock()
					before[ino] = addr
				}
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	// The scratch dir, as it exists while the check runs.
	modes := make(chan os.FileMode, 1)
	go func() {
		for watchCtx.Err() == nil {
			if m, _ := filepath.Glob(filepath.Join(dir, restorePrefix+"*")); len(m) > 0 {
				if st, err := os.Stat(m[0]); err == nil {
					modes <- st.Mode().Perm()
					return
				}
			}
			time.Sleep(time.Millisecond)
		}
	}()
	const checks = 3
	for i := range checks {
		if rc := CheckRestore(ctx, e, Keys{}); !rc.OK {
			t.Fatalf("restore check %d: %+v", i, rc)
		}
	}
	stopWatch()
	<-watched

	// Every listener the attacker saw while the checks ran gets its READ
	// line (curl gives up after 3 s): wait for those, then judge.
	outMu.Lock()
	cut := len(got)
	outMu.Unlock()
	answered := func() bool {
		outMu.Lock()
		defer outMu.Unlock()
		for _, l := range got[:cut] {
			if port, ok := strings.CutPrefix(l, "LISTENER "); ok && !slices.ContainsFunc(got, func(r string) bool { return strings.HasPrefix(r, "READ "+port+" ") || r == "READ "+port }) {
				return false
			}
		}
		return true
	}
	for deadline := time.Now().Add(60 * time.Second); !answered() && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	outMu.Lock()
	var reads []string
	for _, l := range got {
		if strings.HasPrefix(l, "READ ") && strings.Contains(l, b64(secret)) {
			reads = append(reads, l[:min(len(l), 200)])
		}
		if strings.HasPrefix(l, "LISTENER ") || strings.HasPrefix(l, "READ ") {
			t.Logf("attacker: %.200s", l)
		}
	}
	outMu.Unlock()
	mu.Lock()
	defer mu.Unlock()
	if len(opened) > 0 {
		t.Errorf("the restore check opened TCP listeners %v: any local user can connect", opened)
	}
	if len(reads) > 0 {
		t.Errorf("uid 65534 read the secret from the restore check: %v", reads)
	}
	select {
	case m := <-modes:
		if m != 0o700 {
			t.Errorf("the restore check's scratch dir has mode %v, want 0700", m)
		}
	default:
		t.Error("never saw the restore check's scratch dir")
	}
}

// b64 is how etcd's JSON gateway shows bytes.
func b64(s string) string {
	return strings.TrimRight(base64.StdEncoding.EncodeToString([]byte(s)), "=")
}

// ownListeners maps the socket inodes of this process's listening TCP
// sockets to their local address.
func ownListeners(t *testing.T) map[string]string {
	t.Helper()
	mine := map[string]bool{}
	fds, _ := os.ReadDir("/proc/self/fd")
	for _, fd := range fds {
		l, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if err == nil && strings.HasPrefix(l, "socket:[") {
			mine[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	out := map[string]string{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(table)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 10 || f[3] != "0A" || !mine[f[9]] {
				continue
			}
			port := f[1][strings.LastIndex(f[1], ":")+1:]
			p, _ := strconv.ParseUint(port, 16, 16)
			out[f[9]] = fmt.Sprintf("%s (port %d)", f[1], p)
		}
	}
	return out
}

package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/etcdkeeper/etcdkeeper/test/testbed"
)

// notifySocket listens where systemd would and records every message.
type notifySocket struct {
	path string
	conn *net.UnixConn
	mu   sync.Mutex
	msgs []string
}

func listenNotify(t *testing.T) *notifySocket {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	n := &notifySocket{path: path, conn: conn}
	t.Cleanup(func() { conn.Close() })
	go func() {
		buf := make([]byte, 4096)
		for {
			k, err := conn.Read(buf)
			if err != nil {
				return
			}
			n.mu.Lock()
			n.msgs = append(n.msgs, string(buf[:k]))
			n.mu.Unlock()
		}
	}()
	return n
}

// index is the position of the first message at or after from that
// contains part, or -1.
func (n *notifySocket) index(from int, part string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	for i := from; i < len(n.msgs); i++ {
		if strings.Contains(n.msgs[i], part) {
			return i
		}
	}
	return -1
}

func (n *notifySocket) msg(i int) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.msgs[i]
}

func (n *notifySocket) count() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.msgs)
}

func (n *notifySocket) wait(t *testing.T, from int, part string) int {
	t.Helper()
	var at int
	testbed.Eventually(t, converge, "sd_notify "+part, func() string {
		if at = n.index(from, part); at < 0 {
			return fmt.Sprintf("not among %d messages", n.count())
		}
		return ""
	})
	return at
}

// TestSystemdNotifyAndEndpoint runs one agent as systemd would (with a
// NOTIFY_SOCKET and a watchdog) and checks what it tells systemd and what
// its HTTP endpoint serves.
func TestSystemdNotifyAndEndpoint(t *testing.T) {
	t.Parallel()
	c := testbed.New(t, 1)
	sock := listenNotify(t)
	c.Start("node1", "NOTIFY_SOCKET="+sock.path, "WATCHDOG_USEC=2000000")
	c.WaitVoters(converge, "node1")

	sock.wait(t, 0, "READY=1")
	sock.wait(t, 0, "STATUS=node1: leader, healthy; leader node1; 1/1 healthy")
	first := sock.wait(t, 0, "WATCHDOG=1")
	sock.wait(t, first+1, "WATCHDOG=1") // pinged again: from the loop, every second

	pid := c.EtcdPID("node1")
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(env), "NOTIFY_SOCKET") || strings.Contains(string(env), "WATCHDOG_") {
		t.Errorf("etcd's environment carries systemd's variables: only the agent may talk to systemd")
	}

	m := c.Members[0]
	base := fmt.Sprintf("http://%s:%d", m.IP, m.AgentPort)
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body := get(t, base+path); code != http.StatusOK {
			t.Errorf("%s = %d %q, want 200", path, code, body)
		}
	}
	_, body := get(t, base+"/status")
	var st map[string]any
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatalf("/status is not JSON: %v: %s", err, body)
	}
	if st["member"] != "node1" || st["healthy"] != true || st["role"] != "leader" {
		t.Errorf("/status = %s", body)
	}
	_, metrics := get(t, base+"/metrics")
	for _, want := range []string{"etcdkeeper_member_healthy 1", `etcdkeeper_member_role{role="leader"} 1`, "etcdkeeper_reconcile_passes_total", "etcdkeeper_cluster_voters 1"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	before := sock.count()
	if err := c.Signal("node1", syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	reloading := sock.wait(t, before, "RELOADING=1")
	if msg := sock.msg(reloading); !strings.Contains(msg, "MONOTONIC_USEC=") {
		t.Errorf("RELOADING=1 without MONOTONIC_USEC: %q", msg)
	}
	sock.wait(t, reloading+1, "READY=1")

	before = sock.count()
	if err := c.Stop("node1"); err != nil {
		t.Fatal(err)
	}
	sock.wait(t, before, "STOPPING=1")
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	cl := &http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

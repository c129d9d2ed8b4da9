package httpapi

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
)

// curlSocket POSTs body to /recovery through the socket sock as uid (0:
// root; else through setpriv with that uid and no groups); it returns the
// HTTP status (0: no answer) and what came back.
func curlSocket(t *testing.T, uid int, sock, body string) (int, string) {
	t.Helper()
	args := []string{"curl", "-sS", "-m", "10", "-w", "\n%{http_code}", "-X", "POST", "-d", body, "--unix-socket", sock, "http://agent/recovery"}
	if uid != 0 {
		id := fmt.Sprint(uid)
		args = append([]string{"setpriv", "--reuid=" + id, "--regid=" + id, "--clear-groups"}, args...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput()
	s := strings.TrimSpace(string(out))
	said, status := "", s
	if i := strings.LastIndex(s, "\n"); i >= 0 {
		said, status = s[:i], s[i+1:]
	}
	code := 0
	_, _ = fmt.Sscanf(status, "%d", &code)
	return code, said
}

// socketDir is a state dir whose parent other users may traverse, as
// /var/lib/etcdkeeper is.
func socketDir(t *testing.T) string {
	t.Helper()
	root, err := os.MkdirTemp("", "control-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(root) })
	if err := os.Chmod(root, 0o711); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "state")
}

// TestControlSocket, as another local user (uid 65534) and as root: the
// socket's dir keeps the user out; with the dir and the socket opened up
// by mistake, the kernel's word on the caller (SO_PEERCRED) still does
// (403, the agent not asked); root is taken.
func TestControlSocket(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the test calls as root and as uid 65534")
	}
	for _, tool := range []string{"curl", "setpriv"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s", tool)
		}
	}
	dir := socketDir(t)
	sock := SocketPath(dir)
	fake := &fakeRecoverer{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := ServeControl(ctx, zap.NewNop(), sock, ControlHandler(agentSource{fake}, nil)); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("the socket's dir: %v, %v; want 0700", fi.Mode(), err)
	}
	body := `{"id":"evil1","role":"fenced","source":"node2"}`
	asked := func() int { _, r := fake.calls(); return len(r) }

	if code, said := curlSocket(t, 65534, sock, body); code != 0 || asked() != 0 {
		t.Errorf("uid 65534: HTTP %d (%s), agent asked %d times; want no connection", code, said, asked())
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(sock, 0o666); err != nil {
		t.Fatal(err)
	}
	if code, said := curlSocket(t, 65534, sock, body); code != 403 || !strings.Contains(said, "uid 65534") || asked() != 0 {
		t.Errorf("uid 65534 through an opened socket: HTTP %d (%s), agent asked %d times; want 403 naming the uid", code, said, asked())
	}
	if code, said := curlSocket(t, 0, sock, body); code != 202 || asked() != 1 {
		t.Errorf("root: HTTP %d (%s), agent asked %d times; want 202, asked once", code, said, asked())
	}
}

// TestServeControlDir: the socket is served only in a dir of the agent's
// own user, which it closes to others; a file that is not a socket in
// its place is never replaced; an earlier agent's socket is.
func TestServeControlDir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give a dir to another user")
	}
	h := ControlHandler(agentSource{&fakeRecoverer{}}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	foreign := socketDir(t)
	if err := os.Mkdir(foreign, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(foreign, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if err := ServeControl(ctx, zap.NewNop(), SocketPath(foreign), h); err == nil || !strings.Contains(err.Error(), "owned by uid 65534") {
		t.Errorf("a dir of uid 65534: %v, want refused", err)
	}

	notSocket := socketDir(t)
	if err := os.Mkdir(notSocket, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(SocketPath(notSocket), []byte("keep\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := ServeControl(ctx, zap.NewNop(), SocketPath(notSocket), h); err == nil || !strings.Contains(err.Error(), "not a socket: not replaced") {
		t.Errorf("a file in the socket's place: %v, want it kept", err)
	}
	if b, _ := os.ReadFile(SocketPath(notSocket)); string(b) != "keep\n" {
		t.Errorf("the file in the socket's place now holds %q", b)
	}

	open := socketDir(t)
	if err := os.Mkdir(open, 0o755); err != nil {
		t.Fatal(err)
	}
	// An earlier agent's socket, left behind by a kill.
	l, err := net.Listen("unix", SocketPath(open))
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	_ = l.Close()
	if err := ServeControl(ctx, zap.NewNop(), SocketPath(open), h); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(open); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("a 0755 state dir: now %v (%v), want closed to 0700", fi.Mode(), err)
	}
}

package httpapi

import (
	"context"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"syscall"

	"go.uber.org/zap"
)

// The agent takes changes (every POST: a recovery's fence, its source,
// an abort) from this host only over a Unix socket in its state dir, and
// only from root or its own user. The kernel says who the caller is
// (SO_PEERCRED on the accepted connection), so there is no secret to
// leak, rotate or copy along with a config file, and no local forwarder
// (a proxy in front of /metrics, ssh -L, a hostNetwork pod) can lend its
// own address to another user, as a loopback RemoteAddr did. Two locks,
// each enough on its own: the socket's dir is the agent's state dir
// (0700, its own), and each connection's peer uid is checked.
// agent.addr (TCP) serves reads only.

// SocketName is the control socket's name in agent.stateDir.
const SocketName = "agent.sock"

// SocketPath is the control socket of the agent whose state dir is
// stateDir.
func SocketPath(stateDir string) string { return filepath.Join(stateDir, SocketName) }

// maxSocketPath is the size of sun_path, NUL included.
const maxSocketPath = 108

// peerKey carries a control connection's peer credentials in its
// requests' contexts.
type peerKey struct{}

// peer is who is at the other end of a control connection, as the kernel
// says.
type peer struct {
	uid, pid int
	err      error
}

// ServeControl serves h on the Unix socket path until ctx ends, to root
// and to this process's own user only. path's dir is made 0700 if it is
// missing, and must be this user's own directory: a dir that others may
// enter is closed (0700) first.
func ServeControl(ctx context.Context, lg *zap.Logger, path string, h http.Handler) error {
	if len(path) >= maxSocketPath {
		return fmt.Errorf("control socket %s: %d bytes, Linux takes at most %d: use a shorter agent.stateDir", path, len(path), maxSocketPath-1)
	}
	if err := ownDir(lg, filepath.Dir(path)); err != nil {
		return fmt.Errorf("control socket %s: %w", path, err)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&fs.ModeSocket == 0 {
			return fmt.Errorf("control socket %s: a %s is there, not a socket: not replaced", path, fi.Mode().Type())
		}
		// An earlier agent's socket (killed before it could close it).
		if err := os.Remove(path); err != nil {
			return fmt.Errorf("control socket %s: removing the earlier socket: %w", path, err)
		}
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("control socket %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		_ = l.Close()
		return fmt.Errorf("control socket %s: %w", path, err)
	}
	srv := &http.Server{Handler: onlyOwner(h, path), ReadHeaderTimeout: readHeaderTimeout,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, peerKey{}, peerOf(c))
		}}
	serveServer(ctx, lg, path, l, srv, false)
	return nil
}

// ownDir makes sure dir exists, is a directory (not a link) owned by
// this process's user, and that nobody else may enter it.
func ownDir(lg *zap.Logger, dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return fmt.Errorf("%s is a %s, not a directory", dir, fi.Mode().Type())
	case !ok || int(st.Uid) != os.Geteuid():
		return fmt.Errorf("%s is owned by uid %d, not by the agent's user (uid %d): the socket is not served there", dir, st.Uid, os.Geteuid())
	}
	if fi.Mode().Perm()&0o077 != 0 {
		lg.Warn("closing the agent's state dir to other users: it holds the control socket", zap.String("dir", dir), zap.Stringer("was", fi.Mode().Perm()))
		if err := os.Chmod(dir, 0o700); err != nil {
			return err
		}
	}
	return nil
}

// peerOf asks the kernel who connected c.
func peerOf(c net.Conn) peer {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return peer{err: fmt.Errorf("not a unix connection: %T", c)}
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return peer{err: err}
	}
	var cred *syscall.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return peer{err: err}
	}
	if credErr != nil {
		return peer{err: fmt.Errorf("SO_PEERCRED: %w", credErr)}
	}
	return peer{uid: int(cred.Uid), pid: int(cred.Pid)}
}

// onlyOwner serves h to root and to this process's user; anyone else gets
// 403 and h is not asked.
func onlyOwner(h http.Handler, path string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		p, ok := req.Context().Value(peerKey{}).(peer)
		switch {
		case !ok:
			writeJSON(w, http.StatusForbidden, map[string]string{"error": "the caller's credentials are not known: refused"})
		case p.err != nil:
			writeJSON(w, http.StatusForbidden, map[string]string{"error": "the caller's credentials: " + p.err.Error() + ": refused"})
		case p.uid != 0 && p.uid != os.Geteuid():
			writeJSON(w, http.StatusForbidden, map[string]string{"error": fmt.Sprintf(
				"uid %d (pid %d) may not use the agent's control socket %s: only root and the agent's user (uid %d) may", p.uid, p.pid, path, os.Geteuid())})
		default:
			h.ServeHTTP(w, req)
		}
	})
}

// readOnly serves h's reads (GET, HEAD); any other method gets 403 with
// where changes are taken instead.
func readOnly(h http.Handler, socket string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodGet || req.Method == http.MethodHead {
			h.ServeHTTP(w, req)
			return
		}
		where := "the agent's control socket (agent.stateDir/" + SocketName + ")"
		if socket != "" {
			where = "the agent's control socket " + socket
		}
		writeJSON(w, http.StatusForbidden, map[string]string{"error": fmt.Sprintf(
			"%s %s: agent.addr serves reads only (GET /status, /healthz, /readyz, /metrics, /recovery); a change is taken on this host through %s, from root or the agent's user: run etcdkeeper recover on this host",
			req.Method, req.URL.Path, where)})
	})
}

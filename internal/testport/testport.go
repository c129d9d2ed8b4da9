// Package testport hands tests free TCP ports that no other test, in this
// process or in any other test process on the machine, was handed while
// it runs.
//
// A port is found free by listening on port 0 and closing the listener:
// the port is then free, and the kernel may offer it again to the next
// probe of this process (a CI run gave one member's client URL and agent
// address one port) or of another test process (go test runs 4 packages
// at a time, all of them on 127.0.0.1) before the etcd it was meant for
// binds it. So each port handed out is also locked: an flock on a file of
// its own under os.TempDir()/etcdkeeper-test-ports, held until the
// process exits (the kernel drops it then, whatever the exit), and a
// probe whose port another process holds tries again. The lock is on the
// port number, whatever the address: members of different tests on
// different loopback addresses never share a port number either (a tc
// filter on a port, a wildcard bind).
package testport

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

var (
	mu sync.Mutex
	// held keeps the lock files open (and so locked) for the life of the
	// process: a file closed, or collected, would drop its lock.
	held = map[int]*os.File{}
)

// Dir is where the lock files are.
func Dir() string { return filepath.Join(os.TempDir(), "etcdkeeper-test-ports") }

// Free returns a port of ip that nothing listened on when it was probed,
// that no earlier Free of this process returned, and that no other
// running process holds through Free.
func Free(ip string) (int, error) {
	mu.Lock()
	defer mu.Unlock()
	dir := Dir()
	if _, err := os.Stat(dir); err != nil {
		if err := os.MkdirAll(dir, 0o777); err != nil {
			return 0, fmt.Errorf("port locks: %w", err)
		}
		// Like /tmp: every user's tests take their ports here (an
		// flock needs only a read-only file).
		_ = os.Chmod(dir, 0o777|os.ModeSticky)
	}
	lo, hi := localPortRange()
	lastErr := errors.New("every port the kernel offered was handed out before")
	for i := range 4000 {
		// The kernel's offers, and every other try a port of our own
		// choosing: the kernel offers some ports far more often than
		// others, so with many ports held its offers alone may all be
		// taken.
		want := "0"
		if i%2 == 1 {
			// Odd, as the kernel's own choice for bind: connect()
			// prefers even ports.
			c := (lo + rand.IntN(hi-lo+1)) | 1
			if c > hi {
				c -= 2
			}
			want = strconv.Itoa(c)
		}
		l, err := net.Listen("tcp", net.JoinHostPort(ip, want))
		if err != nil {
			if want != "0" {
				continue // in use
			}
			return 0, fmt.Errorf("free port on %s: %w", ip, err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if _, mine := held[port]; mine {
			continue
		}
		f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_RDONLY|os.O_CREATE, 0o444)
		if err != nil {
			lastErr = fmt.Errorf("port lock: %w", err)
			continue // say another user's file we may not read: another port
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				continue // another test process has it
			}
			return 0, fmt.Errorf("port lock %s: %w", f.Name(), err)
		}
		held[port] = f
		return port, nil
	}
	return 0, fmt.Errorf("free port on %s: %w", ip, lastErr)
}

// localPortRange is the kernel's range for ports it picks itself
// (ip_local_port_range): ports outside it may be fixed ones of services.
func localPortRange() (lo, hi int) {
	lo, hi = 32768, 60999
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return lo, hi
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return lo, hi
	}
	l, err1 := strconv.Atoi(f[0])
	h, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil || h-l < 100 {
		return lo, hi
	}
	return l, h
}

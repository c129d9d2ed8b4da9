package testbed

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
)

// The network test bed: each member (its agent and its etcd) runs in its
// own network namespace, joined to the others by a veth pair on one
// bridge. The bridge lives in the test program's own network namespace,
// so the program's clients and observer reach the members through it, as
// a client on another host would. Addresses come from the benchmarking
// range 198.18.0.0/15 (RFC 2544): the bridge is Gateway, the members
// 198.18.0.11 and up. None of these namespaces has a route out.
//
// The program first re-executes itself in fresh network, mount and PID
// namespaces (Isolate): the bridge and the members' namespaces exist only
// in there, every agent and etcd is a process of that PID namespace, and
// all of it disappears with the program, even after a SIGKILL (the kernel
// kills a PID namespace whose first process dies, and the parent's death
// kills that first process).
//
// What this machine's kernel lets a test do to a member's network (tried
// before this was written): take its veth down, add blackhole routes in
// its namespace, shape its veth with tc's tbf or htb with u32 filters.
// tc netem (delay, loss, reorder) and iptables/nft are not available.

const (
	// Gateway is the test program's address on the bridge.
	Gateway = "198.18.0.1"
	netMask = 15
	// isolatedEnv marks the re-executed program that runs inside the
	// private namespaces.
	isolatedEnv = "ETCDKEEPER_TESTBED_ISOLATED"
	bridgeName  = "ekbr0"
	netnsDir    = "/run/netns"
)

// Isolated reports whether this process is the re-executed program that
// runs in the private namespaces Isolate made.
func Isolated() bool { return os.Getenv(isolatedEnv) != "" }

// CanIsolate says why the network test bed cannot run here, "" when it
// can: it needs root and the ip, tc and nsenter commands.
func CanIsolate() string {
	if os.Geteuid() != 0 {
		return "not root"
	}
	for _, c := range []string{"ip", "tc", "nsenter"} {
		if _, err := exec.LookPath(c); err != nil {
			return c + " is not installed"
		}
	}
	return ""
}

// Isolate re-executes the running program, with the same arguments, in
// fresh network, mount and PID namespaces, and returns its exit status;
// the caller exits with it. The child is killed when this process dies;
// SIGINT and SIGTERM are passed on to it. Inside, Isolated is true and
// SetupIsolated prepares the namespaces.
func Isolate() (int, error) {
	self, err := os.Executable()
	if err != nil {
		return 0, err
	}
	cmd := exec.Command(self, os.Args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), isolatedEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWNET | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID,
		Pdeathsig:  syscall.SIGKILL,
	}
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("re-executing in private namespaces: %w", err)
	}
	go func() {
		for s := range sig {
			_ = cmd.Process.Signal(s)
		}
	}()
	err = cmd.Wait()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return ee.ExitCode(), nil
	}
	return 0, err
}

// SetupIsolated prepares the namespaces Isolate made, in the re-executed
// program: mounts private to it (its own /proc for its PID namespace, a
// tmpfs for the named network namespaces), loopback up.
func SetupIsolated() error {
	if !Isolated() {
		return errors.New("not in the private namespaces (testbed.Isolate)")
	}
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making mounts private: %w", err)
	}
	if err := syscall.Mount("proc", "/proc", "proc", 0, ""); err != nil {
		return fmt.Errorf("mounting /proc: %w", err)
	}
	if err := os.MkdirAll(netnsDir, 0o755); err != nil {
		return err
	}
	if err := syscall.Mount("tmpfs", netnsDir, "tmpfs", 0, "mode=755"); err != nil {
		return fmt.Errorf("mounting a tmpfs on %s: %w", netnsDir, err)
	}
	return run("ip", "link", "set", "lo", "up")
}

// Network is the bridge the members' namespaces are joined to.
type Network struct {
	mu    sync.Mutex
	hosts map[string]Host // by namespace
}

// Host is one member's network namespace.
type Host struct {
	NS   string // its name under /run/netns
	Veth string // the bridge's end of its veth pair
	IP   string
}

var (
	netOnce   sync.Once
	netShared *Network
	netErr    error
	hostSeq   atomic.Int64
)

// Net is the bridge of this program's private network namespace, created
// on first use. It fails outside Isolate's namespaces: the test bed never
// touches the host's own network.
func Net() (*Network, error) {
	netOnce.Do(func() {
		if !Isolated() {
			netErr = errors.New("the network test bed runs only inside testbed.Isolate's namespaces")
			return
		}
		netErr = runAll([][]string{
			{"ip", "link", "add", bridgeName, "type", "bridge"},
			{"ip", "addr", "add", fmt.Sprintf("%s/%d", Gateway, netMask), "dev", bridgeName},
			{"ip", "link", "set", bridgeName, "up"},
		})
		netShared = &Network{hosts: map[string]Host{}}
	})
	return netShared, netErr
}

// AddHost makes a new network namespace joined to the bridge, with the
// next free address.
func (nw *Network) AddHost() (Host, error) {
	n := hostSeq.Add(1)
	if n > 500 {
		return Host{}, errors.New("more than 500 hosts")
	}
	i := n + 10
	h := Host{NS: fmt.Sprintf("ek%d", n), Veth: fmt.Sprintf("ekv%d", n), IP: fmt.Sprintf("198.18.%d.%d", i/256, i%256)}
	err := runAll([][]string{
		{"ip", "netns", "add", h.NS},
		{"ip", "link", "add", h.Veth, "type", "veth", "peer", "name", "eth0", "netns", h.NS},
		{"ip", "link", "set", h.Veth, "master", bridgeName, "up"},
		{"ip", "-n", h.NS, "link", "set", "lo", "up"},
		{"ip", "-n", h.NS, "addr", "add", fmt.Sprintf("%s/%d", h.IP, netMask), "dev", "eth0"},
		{"ip", "-n", h.NS, "link", "set", "eth0", "up"},
	})
	if err != nil {
		return Host{}, err
	}
	nw.mu.Lock()
	nw.hosts[h.NS] = h
	nw.mu.Unlock()
	return h, nil
}

// RemoveHost deletes the host's namespace (and with it its veth pair).
func (nw *Network) RemoveHost(h Host) error {
	nw.mu.Lock()
	delete(nw.hosts, h.NS)
	nw.mu.Unlock()
	return run("ip", "netns", "del", h.NS)
}

// Command is the command line that runs bin with args in the host's
// network namespace (nsenter execs it: the PID is the program's).
func (h Host) Command(bin string, args ...string) (string, []string) {
	return "nsenter", append([]string{"--net=" + netnsDir + "/" + h.NS, "--", bin}, args...)
}

// LinkDown takes the host's veth down: it can reach nobody and nobody it,
// the test program included. Connections are not reset; their packets are
// lost until LinkUp.
func (h Host) LinkDown() error { return run("ip", "link", "set", h.Veth, "down") }

// LinkUp brings the host's veth back.
func (h Host) LinkUp() error { return run("ip", "link", "set", h.Veth, "up") }

// Blackhole adds blackhole routes to ips in the host's namespace: the host
// cannot send to them (a connect fails at once, packets of established
// connections are dropped), while their packets still reach it.
func (h Host) Blackhole(ips ...string) error {
	for _, ip := range ips {
		if err := run("ip", "-n", h.NS, "route", "replace", "blackhole", ip+"/32"); err != nil {
			return err
		}
	}
	return nil
}

// Unblackhole removes the blackhole routes to ips (missing ones are fine).
func (h Host) Unblackhole(ips ...string) error {
	var errs []error
	for _, ip := range ips {
		out, err := exec.Command("ip", "-n", h.NS, "route", "del", "blackhole", ip+"/32").CombinedOutput()
		if err != nil && !strings.Contains(string(out), "No such process") {
			errs = append(errs, fmt.Errorf("ip route del blackhole %s in %s: %w: %s", ip, h.NS, err, out))
		}
	}
	return errors.Join(errs...)
}

// Shape limits the host's link to kbit kbit/s in each direction, with
// token bucket filters on both ends of its veth (tbf; netem's delay and
// loss are not available here).
func (h Host) Shape(kbit int) error {
	tbf := []string{"tbf", "rate", fmt.Sprintf("%dkbit", kbit), "burst", "16kb", "latency", "200ms"}
	return runAll([][]string{
		append([]string{"tc", "qdisc", "replace", "dev", h.Veth, "root"}, tbf...),
		append([]string{"tc", "-n", h.NS, "qdisc", "replace", "dev", "eth0", "root"}, tbf...),
	})
}

// Unshape removes Shape's limits.
func (h Host) Unshape() error {
	var errs []error
	for _, args := range [][]string{
		{"tc", "qdisc", "del", "dev", h.Veth, "root"},
		{"tc", "-n", h.NS, "qdisc", "del", "dev", "eth0", "root"},
	} {
		out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
		if err != nil && !strings.Contains(string(out), "No such file") && !strings.Contains(string(out), "Cannot delete qdisc with handle of zero") {
			errs = append(errs, fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, out))
		}
	}
	return errors.Join(errs...)
}

func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func runAll(cmds [][]string) error {
	for _, c := range cmds {
		if err := run(c[0], c[1:]...); err != nil {
			return err
		}
	}
	return nil
}

// Package testbed runs real etcdkeeper agents, each with its real etcd
// child, on loopback addresses 127.0.x.y with free ports (New), or each
// member in its own network namespace on a bridge (NewOnNet, net.go, inside
// the private namespaces of Isolate), where a member's link can be cut or
// slowed: the harness of the integration tests, the benchmarks and the
// chaos run. Nothing here is
// a mock: it drives the binary the README's users run. All three see the
// cluster through one observer, Observe (probe.go), which judges the agents
// without sharing their code.
package testbed

import "time"

// Binary is the etcdkeeper binary the agents run; set it before New.
var Binary string

// TB is the part of testing.TB the test bed needs; the bench and chaos
// programs implement it too.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Errorf(format string, args ...any)
	Logf(format string, args ...any)
	Cleanup(func())
	TempDir() string
	Failed() bool
}

// Eventually waits for cond with a deadline; cond returns "" when met or
// why it is not.
func Eventually(t TB, d time.Duration, what string, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(d)
	var why string
	for time.Now().Before(deadline) {
		if why = cond(); why == "" {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s: not within %s: %s", what, d, why)
}

package testbed

import "testing"

// TestFreePortNeverRepeats: the ports a test cluster's members get are
// distinct, though each probe listener closes before the next probe (the
// kernel would otherwise hand the same port out again: a CI run once gave
// a member's client URL and its agent address one port).
func TestFreePortNeverRepeats(t *testing.T) {
	const ip = "127.0.0.1"
	seen := map[int]bool{}
	for range 3000 {
		p := FreePort(t, ip)
		if seen[p] {
			t.Fatalf("FreePort(%s) returned port %d twice", ip, p)
		}
		seen[p] = true
	}
}

package testport

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestFreeNeverRepeats: ports handed out one after another in one process
// are distinct, though each probe listener closes before the next probe.
func TestFreeNeverRepeats(t *testing.T) {
	seen := map[int]bool{}
	for range 1000 {
		p, err := Free("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		if seen[p] {
			t.Fatalf("Free returned port %d twice", p)
		}
		seen[p] = true
	}
}

const childEnv = "TESTPORT_CHILD_PORTS"

// TestFreeAcrossProcesses: test processes running at once (go test -p 4)
// never get one port, though each probes 127.0.0.1 alone. The children
// hold their ports until all of them have printed theirs. Before the
// locks, 4 processes each starting 300 three-member clusters the way
// testetcd.StartCluster does (6 probes, then 6 binds) had 17 to 30 binds
// refused per run.
func TestFreeAcrossProcesses(t *testing.T) {
	const children, each = 4, 250
	seen := map[int]int{}
	var stdins []io.Closer
	defer func() {
		for _, c := range stdins {
			c.Close()
		}
	}()
	type result struct {
		ports []int
		err   error
	}
	results := make(chan result, children)
	var cmds []*exec.Cmd
	for range children {
		cmd := exec.Command(os.Args[0], "-test.run=^TestChildHoldsPorts$")
		cmd.Env = append(os.Environ(), childEnv+"="+strconv.Itoa(each))
		cmd.Stderr = os.Stderr
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		stdins = append(stdins, in)
		cmds = append(cmds, cmd)
		go func() {
			var r result
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				line := sc.Text()
				if line == "done" {
					results <- r
					return
				}
				if p, err := strconv.Atoi(line); err == nil {
					r.ports = append(r.ports, p)
				}
			}
			r.err = fmt.Errorf("child ended before it printed its ports: %w", sc.Err())
			results <- r
		}()
	}
	for i := range children {
		r := <-results
		if r.err != nil {
			t.Fatal(r.err)
		}
		if len(r.ports) != each {
			t.Fatalf("child printed %d ports, want %d", len(r.ports), each)
		}
		for _, p := range r.ports {
			if j, dup := seen[p]; dup {
				t.Errorf("port %d handed to two running processes (%d and %d)", p, j, i)
			}
			seen[p] = i
		}
	}
	for _, c := range stdins {
		c.Close()
	}
	stdins = nil
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("child: %v", err)
		}
	}
}

// TestChildHoldsPorts is TestFreeAcrossProcesses's child: it takes its
// ports, prints them, and holds them until its stdin closes.
func TestChildHoldsPorts(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv(childEnv))
	if n == 0 {
		t.Skip("the child of TestFreeAcrossProcesses")
	}
	var b strings.Builder
	for range n {
		p, err := Free("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintln(&b, p)
	}
	fmt.Print(b.String())
	fmt.Println("done")
	_, _ = io.Copy(io.Discard, os.Stdin)
}

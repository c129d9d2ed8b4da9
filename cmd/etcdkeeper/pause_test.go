package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/etcdkeeper/etcdkeeper/internal/testetcd"
)

func runCommand(t *testing.T, c *cobra.Command, args ...string) (string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	c.SetOut(&stdout)
	c.SetErr(&stderr)
	c.SetArgs(args)
	err := c.Execute()
	return stdout.String() + stderr.String(), err
}

// TestPauseResume: pause says who paused, for how long and why, and plan
// then says so before what it would do; resume says whose pause it ended;
// a second resume finds none; a bad --for is refused before anything.
func TestPauseResume(t *testing.T) {
	ep, peer := testetcd.Start(t)
	root := t.TempDir()
	path := writeSpec(t, root, fmt.Sprintf("cluster: {name: c1}\nmembers:\n  - {name: default, peerURLs: [%s], clientURLs: [%s]}\nagent:\n  stateDir: \"ROOT/state/{name}\"\n", peer, ep))
	onHost(t, "node1")

	out, err := runCommand(t, pauseCmd(), "--config", path, "--for", "2h", "--reason", "replacing a disk")
	if err != nil {
		t.Fatalf("pause: %v\n%s", err, out)
	}
	for _, want := range []string{"paused by ", "@node1 for 2h (until 20", "): replacing a disk\n", "etcdkeeper resume --config " + path + " ends it"} {
		if !strings.Contains(out, want) {
			t.Errorf("pause printed %q, want it to contain %q", out, want)
		}
	}
	out, _ = runCommand(t, planCmd(), "--config", path)
	if !strings.Contains(out, "@node1 for 2h more: replacing a disk: the agents make no change until then\nwould now (after resume): ") &&
		!strings.Contains(out, "@node1 for 1h59m more: replacing a disk: the agents make no change until then\nwould now (after resume): ") {
		t.Errorf("plan while paused printed:\n%s\nwant the pause, then what it would do", out)
	}
	out, err = runCommand(t, resumeCmd(), "--config", path)
	if err != nil || !strings.Contains(out, "resumed: ended the pause by ") || !strings.Contains(out, "(replacing a disk)\n  the agents act again at their next pass\n") {
		t.Errorf("resume: %v, printed %q", err, out)
	}
	out, err = runCommand(t, resumeCmd(), "--config", path)
	if err != nil || out != "not paused: nothing to resume\n" {
		t.Errorf("a second resume: %v, printed %q", err, out)
	}
	out, _ = runCommand(t, planCmd(), "--config", path)
	if strings.Contains(out, "paused") || !strings.HasPrefix(out, "next: ") {
		t.Errorf("plan after resume printed:\n%s", out)
	}
	out, err = runCommand(t, pauseCmd(), "--config", path, "--for", "-1s")
	if err == nil || !strings.Contains(err.Error(), "--for -1s: give a duration between 1s and") {
		t.Errorf("pause --for -1s: %v, printed %q", err, out)
	}
	out, err = runCommand(t, pauseCmd(), "--config", path)
	if err != nil || !strings.Contains(out, "@node1 until etcdkeeper resume\n") {
		t.Errorf("pause until resume: %v, printed %q", err, out)
	}
}

// TestStatusShowsPaused: below the table, status prints each paused
// agent's account, and nothing for the others.
func TestStatusShowsPaused(t *testing.T) {
	rows := []statusRow{
		{Name: "node1", Paused: true, Decision: "paused by root@node1 for 1h12m more: replacing a disk; no action: node1 is a healthy voter"},
		{Name: "node2", Paused: true, Decision: "paused by root@node1 for 1h12m more: replacing a disk; would now: taking the cluster lock to rejoin: data is corrupt"},
		{Name: "node3", Decision: "no action: node3 is a healthy voter"},
	}
	var out bytes.Buffer
	printPaused(&out, rows)
	want := "node1: paused by root@node1 for 1h12m more: replacing a disk; no action: node1 is a healthy voter\n" +
		"node2: paused by root@node1 for 1h12m more: replacing a disk; would now: taking the cluster lock to rejoin: data is corrupt\n"
	if out.String() != want {
		t.Errorf("status printed\n%s\nwant\n%s", out.String(), want)
	}
}

package etcdproc

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
)

// The processes of TestHandoffAcrossExec, all this test binary: the
// "agent" (stage start, then, after its exec, stage adopt) and its
// "etcd" (child: it ticks on stderr and watches its lifeline).
const (
	stageEnv   = "ETCDPROC_TEST_STAGE"
	handoffEnv = "ETCDPROC_TEST_HANDOFF"
	endEnv     = "ETCDPROC_TEST_END" // stop: stop the child; die: exit hard
)

func TestHelperProcess(t *testing.T) {
	switch os.Getenv(stageEnv) {
	case "child":
		WatchLifeline()
		term := make(chan os.Signal, 1)
		signal.Notify(term, syscall.SIGTERM)
		for {
			select {
			case <-term:
				fmt.Fprintln(os.Stderr, "child: stopping on SIGTERM")
				os.Exit(0)
			case <-time.After(50 * time.Millisecond):
				fmt.Fprintln(os.Stderr, "child: tick")
			}
		}
	case "start":
		helperStart()
	case "adopt":
		helperAdopt()
	}
}

func helperArgs() []string { return []string{os.Args[0], "-test.run=^TestHelperProcess$"} }

// helperEnv is this process's environment with the stage set (syscall.Exec
// does not drop a duplicate, and the first one would win).
func helperEnv(kv ...string) []string {
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, stageEnv+"=") && !strings.HasPrefix(e, handoffEnv+"=") {
			env = append(env, e)
		}
	}
	return append(env, kv...)
}

// helperStart starts the child on a lifeline, hands it over and execs
// itself into stage adopt.
func helperStart() {
	c := Command{Path: os.Args[0], Args: helperArgs()[1:], Env: helperEnv(stageEnv + "=child"), Lifeline: true}
	p, err := start(zap.NewNop(), c, PublishHooks{})
	if err != nil {
		fmt.Println("FAIL start:", err)
		os.Exit(1)
	}
	time.Sleep(200 * time.Millisecond)
	h, err := p.Handoff()
	if err != nil {
		fmt.Println("FAIL handoff:", err)
		os.Exit(1)
	}
	b, _ := json.Marshal(h)
	env := helperEnv(stageEnv+"=adopt", handoffEnv+"="+string(b))
	err = syscall.Exec(os.Args[0], helperArgs(), env)
	fmt.Println("FAIL exec:", err)
	os.Exit(1)
}

// helperAdopt adopts the child after the exec, checks it runs and that
// its log still arrives, then stops it or exits hard.
func helperAdopt() {
	var h Handoff
	if err := json.Unmarshal([]byte(os.Getenv(handoffEnv)), &h); err != nil {
		fmt.Println("FAIL handoff env:", err)
		os.Exit(1)
	}
	p, err := Adopt(zap.NewNop(), h, Command{}, PublishHooks{})
	if err != nil {
		fmt.Println("FAIL adopt:", err)
		os.Exit(1)
	}
	fmt.Printf("ADOPTED %d\n", p.PID())
	deadline := time.Now().Add(5 * time.Second)
	for len(p.tail.lines()) < 3 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	// Later, the leader sends the adopted member a snapshot: etcd logs
	// these, and no publish (it published itself long ago).
	now := time.Now()
	p.publish.line(`{"level":"info","msg":"receiving database snapshot"}`, now)
	p.publish.line(`{"level":"info","msg":"applied snapshot"}`, now)
	time.Sleep(3 * StallAfter)
	fmt.Printf("LINES %d PUBLISHED %v RUNNING %v\n", len(p.tail.lines()), !p.LostPublishRace(), p.Running())
	if os.Getenv(endEnv) == "die" {
		os.Exit(3) // the lifeline closes with this process
	}
	if err := p.Stop(5 * time.Second); err != nil {
		fmt.Println("FAIL stop:", err)
		os.Exit(1)
	}
	fmt.Printf("EXIT %s\n", p.Exit())
}

// TestHandoffAcrossExec: a child on a lifeline outlives its parent's
// exec: the new image adopts it (the same PID, its log still arriving),
// and can stop it and read its exit; when the adopting process dies
// instead, the child ends by its lifeline.
func TestHandoffAcrossExec(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	run := func(end string) (map[string]string, int) {
		cmd := exec.Command(os.Args[0], helperArgs()[1:]...)
		cmd.Env = helperEnv(stageEnv+"=start", endEnv+"="+end)
		out, _ := cmd.Output()
		got := map[string]string{}
		sc := bufio.NewScanner(strings.NewReader(string(out)))
		for sc.Scan() {
			k, v, _ := strings.Cut(sc.Text(), " ")
			got[k] = v
		}
		pid, _ := strconv.Atoi(got["ADOPTED"])
		return got, pid
	}
	got, pid := run("stop")
	if pid == 0 || got["FAIL"] != "" {
		t.Fatalf("the child was not adopted: %v", got)
	}
	var lines int
	var published, running bool
	if _, err := fmt.Sscanf(got["LINES"], "%d PUBLISHED %t RUNNING %t", &lines, &published, &running); err != nil {
		t.Fatalf("LINES %q: %v", got["LINES"], err)
	}
	if lines < 3 || !running {
		t.Errorf("after the adoption: %d log lines, running %v; want its log arriving and the child running", lines, running)
	}
	if !published {
		t.Error("an adopted etcd is taken for one that has not published itself (a later snapshot would look like a publish stall)")
	}
	if got["EXIT"] != "exit status 0" {
		t.Errorf("the adopted child's exit %q, want exit status 0 (stopped by SIGTERM)", got["EXIT"])
	}

	_, pid = run("die")
	if pid == 0 {
		t.Fatal("the child was not adopted")
	}
	deadline := time.Now().Add(LifelineGrace + 10*time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("child %d outlived the process that adopted it by %s: its lifeline did not end it", pid, LifelineGrace+10*time.Second)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// alive: pid runs and is no zombie.
func alive(pid int) bool {
	_, state, err := procParent(pid)
	return err == nil && state != "Z"
}

func TestAdoptRefuses(t *testing.T) {
	if _, err := Adopt(zap.NewNop(), Handoff{PID: os.Getpid(), LogFD: 0, LifelineFD: 1}, Command{}, PublishHooks{}); err == nil {
		t.Error("adopted this process itself, with stdin and stdout as pipes")
	}
	cmd := exec.Command("sleep", "5")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := Adopt(zap.NewNop(), Handoff{PID: cmd.Process.Pid, LogFD: int(f.Fd()), LifelineFD: int(f.Fd())}, Command{}, PublishHooks{}); err == nil || !strings.Contains(err.Error(), "not a pipe") {
		t.Errorf("adopted a child whose fds are no pipes: %v", err)
	}
}

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/etcdkeeper/etcdkeeper/test/testbed"
)

// alarmCorrupt raises a CORRUPT alarm naming a member through the
// maintenance API, as etcd does itself when its hash checks find a member
// that diverged. The cluster then refuses writes until the agents have
// repaired the member (it comes back under a new ID) and disarmed the
// alarm; the target must be one the cluster can lose.
func (n *nemesis) alarmCorrupt() string {
	targets, why := n.candidates()
	s, ok := n.mon.latest()
	if !ok {
		return "no observation"
	}
	for _, t := range targets {
		id := s.ID(t)
		if id == 0 {
			continue
		}
		var others []string
		for _, m := range n.spec {
			if m != t {
				others = append(others, m)
			}
		}
		cli := n.c.Client(others...)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		_, err := pb.NewMaintenanceClient(cli.ActiveConnection()).Alarm(ctx,
			&pb.AlarmRequest{Action: pb.AlarmRequest_ACTIVATE, MemberID: id, Alarm: pb.AlarmType_CORRUPT})
		cancel()
		_ = cli.Close()
		if err != nil {
			n.logf("nemesis: raising a CORRUPT alarm on %s failed: %v", t, err)
			continue
		}
		n.down(t, n.record(fault{Kind: "alarm-corrupt", Target: t, At: time.Now(), Detail: fmt.Sprintf("member %x", id)}))
		return ""
	}
	if why == "" {
		why = "no candidate with a member ID"
	}
	return why
}

// impostor starts a second agent with an existing member's name, on its
// own data and state dirs, as a cloned machine or new hardware started
// while the old host still runs would: it must never remove the live
// member (the member-ID check fails the run if it does). It is stopped
// after 5 to 15 s.
func (n *nemesis) impostor() string {
	targets, why := n.candidates()
	for _, t := range targets {
		text, err := os.ReadFile(n.c.SpecPath(t))
		if err != nil {
			continue
		}
		m := n.c.Member(t)
		dir := filepath.Join(n.c.Dir, "impostors", fmt.Sprintf("%s-%d", t, len(n.Faults)))
		spec := strings.ReplaceAll(string(text), n.c.Dir+"/{name}", dir+"/{name}")
		spec = strings.Replace(spec, fmt.Sprintf("agentAddr: %s:%d", m.IP, m.AgentPort), fmt.Sprintf("agentAddr: %s:%d", m.IP, m.AgentPort+1000), 1)
		path := filepath.Join(dir, "cluster.yaml")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			continue
		}
		if err := os.WriteFile(path, []byte(spec), 0o644); err != nil {
			continue
		}
		bin, args := testbed.Binary, []string{"run", "--config", path, "--name", t, "--log-level", "debug"}
		if m.Host.NS != "" {
			bin, args = m.Host.Command(bin, args...)
		}
		p, err := testbed.StartProcess(filepath.Join(dir, "agent.log"), nil, bin, args...)
		if err != nil {
			n.logf("nemesis: starting an impostor of %s failed: %v", t, err)
			continue
		}
		hold := time.Duration(5+n.rnd.IntN(11)) * time.Second
		id := n.record(fault{Kind: "impostor", Target: t, At: time.Now(), Detail: fmt.Sprintf("a second agent named %s for %s, log %s", t, hold, filepath.Join(dir, "agent.log"))})
		n.lasting = append(n.lasting, &lasting{id: id, until: time.Now().Add(hold), heal: func() error {
			p.Kill()
			return nil
		}})
		return ""
	}
	if why == "" {
		why = "no candidate"
	}
	return why
}

// waitNoAlarms waits until the cluster has no alarm raised: the agents
// disarm the alarm of a member they repaired.
func waitNoAlarms(mon *monitor, since time.Time, d time.Duration) string {
	deadline := time.Now().Add(d)
	why := "no observation"
	for time.Now().Before(deadline) {
		if s, ok := mon.latest(); ok && s.Start.After(since) && s.Err == nil {
			if len(s.Alarms) == 0 {
				return ""
			}
			why = fmt.Sprintf("alarms still raised: %v", s.Alarms)
		}
		time.Sleep(250 * time.Millisecond)
	}
	return why
}

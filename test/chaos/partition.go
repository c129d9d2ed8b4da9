package main

import (
	"fmt"
	"slices"
	"time"

	"github.com/etcdkeeper/etcdkeeper/test/testbed"
)

// The faults that last: network partitions and slow links (on the network
// test bed, test/testbed/net.go: each member in its own network namespace
// on a bridge), and slow hosts (a cgroup v1 cpu quota). Each is healed
// after a random time; meanwhile its target counts as down for the quorum
// rule of candidates, so the nemesis never cuts off more than the cluster
// can lose.

// partition cuts one member off, in one of four ways:
//   - minority: its veth down: it reaches nobody, nobody reaches it (the
//     test's clients and observer included);
//   - leader: the current leader, cut from every other member by
//     blackhole routes on both sides (the clients still reach it);
//   - one-way: blackhole routes on one side only: the member cannot send
//     to the others (out), or the others cannot send to it (in), while
//     packets the other way still arrive;
//   - flap: its veth goes down and up every 0.3 to 3 s, for 10 to 30 s.
//
// Each is healed after 3 to 20 s (flap: when it stops flapping).
func (n *nemesis) partition() string {
	targets, why := n.candidates()
	if len(targets) == 0 {
		return why
	}
	modes := []string{"minority", "leader", "one-way", "flap"}
	mode := modes[n.rnd.IntN(len(modes))]
	target := targets[0]
	if mode == "leader" {
		s, _ := n.mon.latest()
		leader, ok := s.ByID(s.Leader())
		if !ok || !slices.Contains(targets, leader.Name) {
			mode = "minority" // the leader may not fail now
		} else {
			target = leader.Name
		}
	}
	h := n.c.Member(target).Host
	var others []testbed.Host
	var otherIPs []string
	for _, m := range n.c.Members {
		if m.Name != target {
			others = append(others, m.Host)
			otherIPs = append(otherIPs, m.IP)
		}
	}
	hold := time.Duration(3000+n.rnd.IntN(17000)) * time.Millisecond
	l := &lasting{until: time.Now().Add(hold)}
	detail := mode
	var err error
	switch mode {
	case "minority":
		err = h.LinkDown()
		l.heal = h.LinkUp
		detail += ": its veth down"
	case "leader", "one-way":
		in, out := true, true
		if mode == "one-way" {
			in = n.rnd.IntN(2) == 0
			out = !in
		}
		if out {
			err = h.Blackhole(otherIPs...)
			detail += fmt.Sprintf(": %s cannot send to the other hosts", target)
		}
		if in {
			for _, o := range others {
				if e := o.Blackhole(h.IP); e != nil && err == nil {
					err = e
				}
			}
			detail += fmt.Sprintf(": the other hosts cannot send to %s", target)
		}
		if mode == "leader" {
			detail = "leader: " + target + " (the leader) cut from every other host both ways by blackhole routes"
		}
		l.heal = func() error {
			e1 := h.Unblackhole(otherIPs...)
			var e2 error
			for _, o := range others {
				if e := o.Unblackhole(h.IP); e != nil {
					e2 = e
				}
			}
			if e1 != nil {
				return e1
			}
			return e2
		}
	case "flap":
		hold = time.Duration(10+n.rnd.IntN(21)) * time.Second
		l.until = time.Now().Add(hold)
		up, next, flips := true, time.Now(), 0
		l.tick = func() {
			if time.Now().Before(next) {
				return
			}
			if up {
				_ = h.LinkDown()
			} else {
				_ = h.LinkUp()
			}
			up, flips = !up, flips+1
			next = time.Now().Add(time.Duration(300+n.rnd.IntN(2700)) * time.Millisecond)
		}
		l.tick()
		l.heal = func() error {
			n.logf("nemesis: %s's link flapped %d times", target, flips)
			return h.LinkUp()
		}
		detail += ": its veth down and up every 0.3-3 s"
	}
	if err != nil {
		_ = l.heal()
		n.logf("nemesis: partition of %s failed: %v", target, err)
		return "partition failed: " + err.Error()
	}
	detail += fmt.Sprintf(", for %s", hold.Round(100*time.Millisecond))
	f := fault{Kind: "partition", Target: target, At: time.Now(), Detail: detail, Cut: []string{target}}
	l.id = n.record(f)
	n.Counts["partition-"+mode]++
	n.down(target, l.id)
	n.lasting = append(n.lasting, l)
	return ""
}

// slowTarget prefers a member that is repairing (a corrupt WAL not yet
// recovered) or joining (added by a spec edit, not yet a healthy voter),
// where a slow link or host hurts most; otherwise a member that may fail.
func (n *nemesis) slowTarget(kind string) (string, string) {
	var busy []string
	for name, id := range n.active {
		if n.Faults[id].Kind == "corrupt-wal" && n.c.AgentRunning(name) && !n.slowed(name, kind) {
			busy = append(busy, name+" (repairing)")
		}
	}
	for name := range n.joining {
		if n.c.AgentRunning(name) && !n.slowed(name, kind) {
			busy = append(busy, name+" (joining)")
		}
	}
	slices.Sort(busy)
	if len(busy) > 0 {
		b := busy[n.rnd.IntN(len(busy))]
		for i := range b {
			if b[i] == ' ' {
				return b[:i], b[i+1:]
			}
		}
	}
	targets, why := n.candidates()
	for _, t := range targets {
		if !n.slowed(t, kind) {
			return t, ""
		}
	}
	if why == "" {
		why = "every candidate is slowed already"
	}
	return "", why
}

// slowed: a fault of kind acts on member now.
func (n *nemesis) slowed(member, kind string) bool {
	for _, l := range n.lasting {
		if f := n.Faults[l.id]; f.Kind == kind && f.Target == member {
			return true
		}
	}
	return false
}

// slowLink shapes a member's link to 0.5 to 4 Mbit/s each way (tbf on both
// ends of its veth) for 5 to 20 s.
func (n *nemesis) slowLink() string {
	target, why := n.slowTarget("slow-link")
	if target == "" {
		return why
	}
	h := n.c.Member(target).Host
	kbit := 500 + 500*n.rnd.IntN(8)
	hold := time.Duration(5+n.rnd.IntN(16)) * time.Second
	if err := h.Shape(kbit); err != nil {
		_ = h.Unshape()
		return "shaping failed: " + err.Error()
	}
	detail := fmt.Sprintf("%d kbit/s each way for %s", kbit, hold)
	if why != "" {
		detail += ", while " + why
	}
	id := n.record(fault{Kind: "slow-link", Target: target, At: time.Now(), Detail: detail})
	n.lasting = append(n.lasting, &lasting{id: id, until: time.Now().Add(hold), heal: h.Unshape})
	if _, busy := n.active[target]; !busy {
		n.down(target, id)
	}
	return ""
}

// slowHost limits a member's agent and etcd together to 5 to 25 % of a
// core (a cgroup v1 cpu quota) for 5 to 20 s; an agent restarted
// meanwhile joins the cgroup too.
func (n *nemesis) slowHost() string {
	target, why := n.slowTarget("slow-host")
	if target == "" {
		return why
	}
	l := n.cpu[target]
	if l == nil {
		var err error
		if l, err = testbed.NewCPULimit(target); err != nil {
			return "cpu cgroup: " + err.Error()
		}
		n.cpu[target] = l
	}
	percent := 5 + 5*n.rnd.IntN(5)
	hold := time.Duration(5+n.rnd.IntN(16)) * time.Second
	if err := l.Add(n.c.AgentPID(target), n.c.EtcdPID(target)); err != nil {
		return "cpu cgroup: " + err.Error()
	}
	if err := l.Set(percent); err != nil {
		return "cpu quota: " + err.Error()
	}
	detail := fmt.Sprintf("agent and etcd limited to %d%% of a core for %s", percent, hold)
	if why != "" {
		detail += ", while " + why
	}
	id := n.record(fault{Kind: "slow-host", Target: target, At: time.Now(), Detail: detail})
	throttled := l.Throttled()
	n.lasting = append(n.lasting, &lasting{id: id, until: time.Now().Add(hold),
		tick: func() { _ = l.Add(n.c.AgentPID(target), n.c.EtcdPID(target)) },
		heal: func() error {
			n.logf("nemesis: %s throttled %d times", target, l.Throttled()-throttled)
			return l.Clear()
		}})
	if _, busy := n.active[target]; !busy {
		n.down(target, id)
	}
	return ""
}

// rejoinCgroup puts a restarted agent into its host's cpu cgroup (its etcd
// will follow as its child).
func (n *nemesis) rejoinCgroup(name string) {
	if l := n.cpu[name]; l != nil {
		_ = l.Add(n.c.AgentPID(name))
	}
}

// tendLasting heals the lasting faults that are due (all when all) and
// ticks the others.
func (n *nemesis) tendLasting(all bool) {
	keep := n.lasting[:0]
	for _, l := range n.lasting {
		if all || !time.Now().Before(l.until) {
			if err := l.heal(); err != nil {
				n.logf("nemesis: HEAL FAILED for %s of %s: %v", n.Faults[l.id].Kind, n.Faults[l.id].Target, err)
				n.healErrors = append(n.healErrors, err.Error())
			}
			n.ended(l.id)
			continue
		}
		if l.tick != nil {
			l.tick()
		}
		keep = append(keep, l)
	}
	n.lasting = keep
}

// stillActing: fault id is a lasting fault not healed yet.
func (n *nemesis) stillActing(id int) bool {
	for _, l := range n.lasting {
		if l.id == id {
			return true
		}
	}
	return false
}

package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/repair"
)

// inspectTimeout bounds the offline check of a data dir; it walks every
// db page, which takes a while on a multi-GB db.
const inspectTimeout = 10 * time.Minute

// inspect checks the data dir offline with etcd's own WAL and bbolt code,
// in a child process ("etcdkeeper inspect"): a damaged db page can crash
// bbolt, and that must not take the agent down.
func (a *Agent) inspect(ctx context.Context) model.Data {
	_, self := a.Spec()
	r, err := a.inspectChild(ctx, self.DataDir)
	if err != nil {
		return model.Data{Kind: model.DataUnreadable, Reason: err.Error()}
	}
	a.mu.Lock()
	a.lastReport = &r
	a.mu.Unlock()
	return dataOf(r)
}

// dataOf is an inspection's report as the decisions see it.
func dataOf(r repair.Report) model.Data {
	d := model.Data{ClusterID: r.ClusterID, MemberID: r.MemberID, Reason: r.Reason, Members: r.Members}
	switch r.State {
	case repair.DirHealthy, repair.DirTornTail:
		// etcd cuts a torn WAL tail itself on start (keeping a .broken copy).
		d.Kind = model.DataHealthy
	case repair.DirCorrupt:
		d.Kind = model.DataCorrupt
	case repair.DirLocked:
		d.Kind = model.DataLocked
	case repair.DirUnreadable:
		// Permissions look like corruption to a careless reader: never
		// treat them as empty or corrupt.
		d.Kind = model.DataUnreadable
	default:
		d.Kind = model.DataEmpty
	}
	return d
}

func (a *Agent) inspectChild(ctx context.Context, dir string) (repair.Report, error) {
	ctx, cancel := context.WithTimeout(ctx, inspectTimeout)
	defer cancel()
	var out, errb bytes.Buffer
	cmd := exec.CommandContext(ctx, a.cfg.Self, "inspect", "--data-dir", dir, "-o", "json")
	cmd.Stdout, cmd.Stderr = &out, &errb
	runErr := cmd.Start()
	if runErr == nil {
		// A full check of a multi-GB db takes minutes: keep the watchdog
		// fed while the check uses CPU, and only then.
		stop := a.notify.While(func() int64 { return cpuTicks(cmd.Process.Pid) })
		runErr = cmd.Wait()
		stop()
	}
	var r repair.Report
	if jerr := json.Unmarshal(bytes.TrimSpace(out.Bytes()), &r); jerr == nil && out.Len() > 0 {
		return r, nil
	}
	// No report: the check itself died. A crash inside bbolt means the db
	// is damaged; anything else is not evidence of corruption.
	tail := strings.Split(strings.TrimSpace(errb.String()), "\n")
	code := -1
	if cmd.ProcessState != nil {
		code = cmd.ProcessState.ExitCode()
	}
	v := repair.Classify(repair.Exit{Code: code, Tail: tail})
	if v.Class == repair.ClassCorrupt {
		return repair.Report{State: repair.DirCorrupt, Reason: "data dir check crashed inside bbolt: " + v.Reason}, nil
	}
	if runErr == nil {
		runErr = errors.New("no report")
	}
	return repair.Report{}, fmt.Errorf("data dir check of %s failed: %w: %s", dir, runErr, lastLine(tail))
}

func lastLine(lines []string) string {
	if len(lines) == 0 {
		return ""
	}
	return lines[len(lines)-1]
}

// cpuTicks is the CPU time (user + system, in clock ticks) process pid has
// used so far; 0 when it cannot be read. A check that uses CPU makes
// progress.
func cpuTicks(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces: count from its end.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return utime + stime
}

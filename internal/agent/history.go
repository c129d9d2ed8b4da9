package agent

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/etcdkeeper/etcdkeeper/internal/history"
	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/reconcile"
	"github.com/etcdkeeper/etcdkeeper/internal/recovery"
	"github.com/etcdkeeper/etcdkeeper/internal/repair"
)

const historyFile = history.FileName

// historyPushTimeout bounds the pass's push of the history: a cluster
// that does not answer in time gets the events on a later pass.
const historyPushTimeout = time.Second

// maxUnsaved bounds the events kept in memory while the mirror cannot
// be written.
const maxUnsaved = 100

// remember records a change this agent made (or refused): in the state
// dir's mirror at once, in the cluster on a pass that can reach it
// (pushHistory). A mirror that cannot be written is reported (noteWrite)
// and never stops the step that made the change: the event waits in
// memory (the last maxUnsaved) and each pass writes it again
// (saveHistory), which also clears the report once the write works.
func (a *Agent) remember(ev history.Event) {
	_, self := a.Spec()
	ev.Host = self.Name
	if ev.Time.IsZero() {
		ev.Time = time.Now().UTC()
	}
	a.histMu.Lock()
	defer a.histMu.Unlock()
	a.saveHistoryLocked(append(a.unsaved, ev))
}

// saveHistory writes the events the mirror could not take before.
func (a *Agent) saveHistory() {
	a.histMu.Lock()
	defer a.histMu.Unlock()
	if len(a.unsaved) > 0 {
		a.saveHistoryLocked(a.unsaved)
	}
}

// saveHistoryLocked writes evs to the mirror, oldest first; those it
// could not write are kept for the next pass.
func (a *Agent) saveHistoryLocked(evs []history.Event) {
	for i, e := range evs {
		if a.noteWrite(historyFile, a.history.Append(e)) != nil {
			rest := evs[i:]
			if len(rest) > maxUnsaved {
				rest = rest[len(rest)-maxUnsaved:]
			}
			a.unsaved = append([]history.Event(nil), rest...)
			return
		}
		a.historyPending.Store(true)
	}
	a.unsaved = nil
}

// History is this agent's mirror of its own events (GET /history).
func (a *Agent) History() ([]history.Event, error) { return a.history.Events() }

// pushHistory carries the mirror's events that the cluster does not have
// yet to it: at most history.MaxPush per pass, within
// historyPushTimeout, only while the local member has a leader (without,
// the write would only wait out its deadline) and, on a recovery's
// source, once the recovery is over (its finish is recorded first).
func (a *Agent) pushHistory(ctx context.Context, in reconcile.Input) {
	a.saveHistory()
	if a.client == nil || in.Local.Answer == nil || in.Local.Answer.Leader == 0 {
		return
	}
	if r := in.Local.Recovery; r.Open() && r.Role == string(recovery.RoleSource) {
		return
	}
	if !a.historyPending.Swap(false) {
		return
	}
	evs, err := a.history.Pending()
	if err != nil || len(evs) == 0 {
		return
	}
	a.historyPending.Store(true)
	s, _ := a.Spec()
	pctx, cancel := context.WithTimeout(ctx, historyPushTimeout)
	defer cancel()
	if err := a.client.AppendHistory(pctx, s.Cluster.Name, evs, history.Keep); err != nil {
		a.lg.Debug("history not pushed yet", zap.Int("events", len(evs)), zap.Error(err))
		return
	}
	if a.noteWrite(historyFile, a.history.MarkPushed(evs)) == nil && len(evs) < history.MaxPush {
		a.historyPending.Store(false)
	}
}

// rememberRecovery records a step of this host's part in a recovery when
// it is a new one.
func (a *Agent) rememberRecovery(prev *recovery.Journal, j recovery.Journal) {
	if prev != nil && prev.ID == j.ID && prev.Step == j.Step {
		return
	}
	d := map[string]string{"recovery": j.ID, "role": string(j.Role), "source": j.Source}
	if j.Aside != "" {
		d["aside"] = j.Aside
	}
	if j.Snapshot != "" {
		d["snapshot"] = j.Snapshot
	}
	if j.ClusterID != 0 {
		d["clusterID"] = history.HexID(j.ClusterID)
	}
	if j.OldMemberID != 0 {
		d["oldMemberID"] = history.HexID(j.OldMemberID)
	}
	a.remember(history.Event{Kind: "recovery-" + string(j.Step), MemberID: history.HexID(j.MemberID), Reason: j.Error, Detail: d})
}

// rejoinEvent is the end of a rejoin (kind: repair-done, join-done,
// rejoin-abandoned) as member id: why, the member it replaced, and where
// the old data and the safety snapshot went.
func rejoinEvent(kind string, id uint64, j repair.Journal) history.Event {
	d := map[string]string{"rejoin": j.ID, "took": j.UpdatedAt.Sub(j.StartedAt).Round(time.Millisecond).String()}
	if j.OldMemberID != 0 {
		d["oldMemberID"] = history.HexID(j.OldMemberID)
	}
	if j.NewMemberID != 0 {
		d["newMemberID"] = history.HexID(j.NewMemberID)
	}
	if j.BackupPath != "" {
		d["backup"] = j.BackupPath
	}
	if j.SnapshotPath != "" {
		d["snapshot"] = j.SnapshotPath
	}
	return history.Event{Kind: kind, MemberID: history.HexID(id), Reason: j.Reason, Detail: d}
}

// stepEvent is a membership change of the decision (remove,
// update-peer-urls, move-leader).
func stepEvent(step reconcile.Step) history.Event {
	d := map[string]string{}
	if len(step.PeerURLs) > 0 {
		d["peerURLs"] = strings.Join(step.PeerURLs, ",")
	}
	if step.To != 0 {
		d["to"] = fmt.Sprintf("%x", step.To)
	}
	return history.Event{Kind: step.Kind.String(), Member: step.Name, MemberID: history.HexID(step.MemberID), Reason: step.Reason, Detail: d}
}

// pauseEvent is this agent seeing the operator's pause p take effect.
func pauseEvent(p *model.Pause) history.Event {
	d := map[string]string{"by": p.By}
	if !p.Until.IsZero() {
		d["until"] = p.Until.UTC().Format(time.RFC3339)
	}
	if p.Local {
		d["local"] = "true"
	}
	return history.Event{Kind: "paused", Reason: p.Reason, Detail: d}
}

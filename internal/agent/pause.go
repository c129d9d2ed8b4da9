package agent

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/etcdkeeper/etcdkeeper/internal/history"
	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/reconcile"
	"github.com/etcdkeeper/etcdkeeper/internal/statefile"
)

// observePause reads the operator's pause (etcdkeeper pause) for the
// decision: the cluster's key whenever the cluster answers with a leader
// this pass, and otherwise the pause last read there — a pause is not
// lifted by the quorum going away, only by resume or its end; else the
// pause kept in the state dir (taken without quorum).
func (a *Agent) observePause(ctx context.Context, in *reconcile.Input) {
	in.Now = time.Now()
	if in.Cluster != nil || (in.Local.Answer != nil && in.Local.Answer.Leader != 0) {
		s, _ := a.Spec()
		if p, err := a.client.GetPause(ctx, s.Cluster.Name); err != nil {
			a.lg.Debug("reading the pause", zap.Error(err))
		} else {
			a.pause = p
		}
	}
	if a.pause != nil {
		m := model.MarkOf(a.pause)
		a.pauseMark.Store(&m)
	}
	in.Pause = a.pause
	if in.Pause.Resumed(a.resumedMark()) {
		in.Pause = nil // resume reached this agent since it was written
	}
	if !in.Pause.InForce(in.Now) {
		in.Pause = a.loadLocalPause()
	}
	local := in.Pause.InForce(in.Now) && in.Pause.Local
	a.updateStatus(func(s *Status) { s.Paused, s.PausedLocal = in.Pause.InForce(in.Now), local })
	if on := in.Pause.InForce(in.Now); on != a.paused {
		a.paused = on
		if on {
			a.lg.Info("paused", zap.String("by", in.Pause.By), zap.String("reason", in.Pause.Reason), zap.Time("until", in.Pause.Until))
			a.remember(pauseEvent(in.Pause))
		} else {
			a.lg.Info("pause over: the agent acts again")
			a.remember(history.Event{Kind: "pause-over"})
		}
	}
}

// pauseFile keeps a pause taken while the cluster had no quorum to hold
// it: honoured until resume (or its end), across restarts of the agent.
const pauseFile = "pause.json"

// PauseLocal keeps p in the state dir (POST /pause) and wakes the loop.
func (a *Agent) PauseLocal(p model.Pause) error {
	if err := a.noteWrite(pauseFile, statefile.Save(a.statePath(pauseFile), p)); err != nil {
		return fmt.Errorf("keeping the pause: %w", err)
	}
	a.lg.Info("paused on this host", zap.String("by", p.By), zap.String("reason", p.Reason), zap.Time("until", p.Until))
	a.Wake()
	return nil
}

// resumedFile holds the mark (model.ResumeMark) of the cluster's pause
// this agent held when resume last reached it: that pause, and no other,
// is over here.
const resumedFile = "resumed.json"

// ResumeLocal ends the local pause (POST /resume) and the cluster's pause
// last read (see resumedFile). It returns the local pause it ended, nil
// when none was kept.
func (a *Agent) ResumeLocal() (*model.Pause, error) {
	var mark model.ResumeMark
	if m := a.pauseMark.Load(); m != nil {
		mark = *m
	}
	if mark != (model.ResumeMark{}) && mark != a.resumedMark() {
		if err := a.noteWrite(resumedFile, statefile.Save(a.statePath(resumedFile), mark)); err != nil {
			return nil, fmt.Errorf("keeping the resume: %w", err)
		}
	}
	p := a.loadLocalPause()
	if err := statefile.Remove(a.statePath(pauseFile)); err != nil {
		return nil, fmt.Errorf("ending the local pause: %w", err)
	}
	a.lg.Info("resumed on this host", zap.String("cluster-pause", mark.ID), zap.Int64("cluster-pause-revision", mark.Revision), zap.Bool("local-pause-ended", p != nil))
	a.Wake()
	return p, nil
}

// resumedMark is the mark of the cluster's pause resume last ended here
// (zero: none).
func (a *Agent) resumedMark() model.ResumeMark {
	var m model.ResumeMark
	if _, err := statefile.Load(a.statePath(resumedFile), &m); err != nil {
		a.lg.Warn("the resume mark is not read: no pause counts as resumed", zap.Error(err))
		return model.ResumeMark{}
	}
	return m
}

// loadLocalPause is the pause kept in the state dir, or nil. One that
// does not parse holds the agent too: it was written to stop it.
func (a *Agent) loadLocalPause() *model.Pause {
	var p model.Pause
	found, err := statefile.Load(a.statePath(pauseFile), &p)
	if !found {
		return nil
	}
	if err != nil {
		p = model.Pause{Reason: fmt.Sprintf("%v: etcdkeeper resume ends it", err)}
	}
	p.Local = true
	return &p
}

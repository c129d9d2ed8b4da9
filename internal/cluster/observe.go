package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
)

// Observe lists the members (linearizably: it fails without a leader) and
// asks each for its status, in parallel and with deadlines, so that a dead
// member costs one timeout, not one per member. It marks which voters
// are caught up against this client's previous observation (see
// model.CaughtUp): a client that observes once knows only who is level
// with the leader.
func (c *Client) Observe(ctx context.Context) (model.Cluster, error) {
	clusterID, members, err := c.Members(ctx)
	if err != nil {
		// The members kept may be the ones that failed now: try every
		// endpoint again (steer).
		c.steerTo(c.endpoints)
		return model.Cluster{}, err
	}
	v := model.Cluster{ClusterID: clusterID, Members: fromPBs(members), Now: time.Now()}
	answers := make([]statusAnswer, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		if len(m.ClientURLs) == 0 {
			v.Members[i].Err = "unstarted: no client URL"
			continue
		}
		wg.Add(1)
		go func(mv *model.Member, endpoint string, a *statusAnswer) {
			defer wg.Done()
			c.fillStatus(ctx, mv, clusterID, endpoint, a)
		}(&v.Members[i], m.ClientURLs[0], &answers[i])
	}
	wg.Wait()
	alarmed := false
	for i, a := range answers {
		if a.foreign {
			v.Foreign = append(v.Foreign, v.Members[i].Err)
		}
		alarmed = alarmed || a.alarmed
	}
	if err := c.fillAlarms(ctx, &v, alarmed); err != nil {
		return model.Cluster{}, err
	}
	v.LeaderID = model.LeaderOf(v.Members)
	c.fillVersion(ctx, &v)
	c.progressMu.Lock()
	c.progress.Stamp(&v, c.catchUp)
	c.progressMu.Unlock()
	c.steerTo(steer(c.endpoints, v))
	return v, nil
}

// fillAlarms reads the cluster's alarms, typed, when any member's status
// reported one (each status lists every active alarm as text; AlarmList
// says which member each names), and judges each member's health by the
// alarms that name it.
func (c *Client) fillAlarms(ctx context.Context, v *model.Cluster, reported bool) error {
	if reported {
		alarms, err := c.Alarms(ctx)
		if err != nil {
			return err
		}
		v.Alarms = alarms
	}
	for i := range v.Members {
		m := &v.Members[i]
		for _, a := range v.Alarms {
			if a.MemberID == m.ID {
				m.Alarms = append(m.Alarms, a)
			}
		}
		if m.Err == "" && m.Leader != 0 {
			m.Healthy = model.Healthy(m.ID, m.ID, m.Leader, m.Alarms)
		}
	}
	return nil
}

// Alarms lists the cluster's active alarms.
func (c *Client) Alarms(ctx context.Context) ([]model.Alarm, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	cli, err := c.conn()
	if err != nil {
		return nil, err
	}
	resp, err := cli.AlarmList(ctx)
	if err != nil {
		return nil, fmt.Errorf("alarm list: %w", err)
	}
	out := make([]model.Alarm, 0, len(resp.Alarms))
	for _, a := range resp.Alarms {
		out = append(out, model.Alarm{MemberID: a.MemberID, Type: a.Alarm.String()})
	}
	return out, nil
}

// Disarm clears one alarm; an alarm that is no longer raised is success.
func (c *Client) Disarm(ctx context.Context, a model.Alarm) error {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	cli, err := c.conn()
	if err != nil {
		return err
	}
	kind, ok := etcdserverpb.AlarmType_value[a.Type]
	if !ok {
		return fmt.Errorf("disarm: unknown alarm type %q", a.Type)
	}
	if _, err := cli.AlarmDisarm(ctx, &clientv3.AlarmMember{MemberID: a.MemberID, Alarm: etcdserverpb.AlarmType(kind)}); err != nil {
		return fmt.Errorf("disarm %s alarm of member %x: %w", a.Type, a.MemberID, err)
	}
	return nil
}

// statusAnswer is what a member's status said beyond its model.Member:
// it answers for another cluster (foreign), it reports errors (alarmed).
type statusAnswer struct{ foreign, alarmed bool }

func (c *Client) fillStatus(ctx context.Context, mv *model.Member, clusterID uint64, endpoint string, a *statusAnswer) {
	// A member that is down refuses the connection at once, but the
	// client's retries would wait out the whole deadline: ask TCP first.
	if !AnyListening(ctx, []string{endpoint}) {
		mv.Err = endpoint + ": not listening"
		return
	}
	st, err := c.Status(ctx, endpoint)
	if err != nil {
		mv.Err = err.Error()
		return
	}
	// A re-added member reuses its host's URLs: the endpoint of a stale
	// entry answers as the new member and must not make the stale one
	// look healthy.
	if st.Header.MemberId != mv.ID {
		mv.Err = fmt.Sprintf("%s answers as member %x, not %x", endpoint, st.Header.MemberId, mv.ID)
		return
	}
	if st.Header.ClusterId != clusterID {
		mv.Err = fmt.Sprintf("%s answers for cluster %x, not %x", endpoint, st.Header.ClusterId, clusterID)
		a.foreign = true
		return
	}
	mv.Leader = st.Leader
	mv.RaftIndex = st.RaftIndex
	mv.RaftTerm = st.RaftTerm
	mv.DBSize = st.DbSize
	mv.DBSizeInUse = st.DbSizeInUse
	mv.Quota = c.quotaOf(mv.Name, st.DbSizeQuota)
	mv.Version = st.Version
	if d := st.DowngradeInfo; d != nil && d.Enabled {
		mv.DowngradeTarget = d.TargetVersion
	}
	// Health is judged once the alarms are known (fillAlarms).
	a.alarmed = len(st.Errors) > 0
}

// fillVersion reads the cluster version from the leader (or any member
// that answers) and the downgrade its status reports.
func (c *Client) fillVersion(ctx context.Context, v *model.Cluster) {
	for _, m := range v.Members {
		if m.DowngradeTarget != "" {
			v.DowngradeTarget = m.DowngradeTarget
		}
	}
	ms := slices.Clone(v.Members)
	slices.SortStableFunc(ms, func(a, b model.Member) int {
		return compareBool(a.ID == v.LeaderID, b.ID == v.LeaderID)
	})
	for _, m := range ms {
		if m.Err != "" || len(m.ClientURLs) == 0 {
			continue
		}
		if ver, err := c.ClusterVersion(ctx, m.ClientURLs[0]); err == nil {
			v.Version = ver
			return
		}
	}
}

// compareBool orders true first.
func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return -1
	}
	return 1
}

// fromPB converts a member. A member that never started has no client
// URLs; a member of the initial cluster carries its name from
// --initial-cluster even then, so the name is cleared: "unstarted" means
// one thing everywhere (Name == "").
func fromPB(m *etcdserverpb.Member) model.Member {
	name := m.Name
	if len(m.ClientURLs) == 0 {
		name = ""
	}
	return model.Member{
		ID:         m.ID,
		Name:       name,
		PeerURLs:   append([]string(nil), m.PeerURLs...),
		ClientURLs: append([]string(nil), m.ClientURLs...),
		IsLearner:  m.IsLearner,
	}
}

// fromPBs converts a member list.
func fromPBs(ms []*etcdserverpb.Member) []model.Member {
	out := make([]model.Member, len(ms))
	for i, m := range ms {
		out[i] = fromPB(m)
	}
	return out
}

// AnyPeerAnswers asks each endpoint for its status and returns the first
// evidence that an etcd is there: a status answer, or a refusal (TLS
// handshake, authentication, permission). It returns "" only when no
// endpoint could be reached at all — the one case in which a never-joined
// host may form a new cluster.
func (c *Client) AnyPeerAnswers(ctx context.Context, endpoints []string) string {
	answers := make(chan string, len(endpoints))
	for _, ep := range endpoints {
		go func(ep string) {
			_, err := c.Status(ctx, ep)
			switch {
			case err == nil:
				answers <- ep + " answers"
			case refused(err):
				answers <- fmt.Sprintf("%s refused us: %v", ep, err)
			default:
				answers <- ""
			}
		}(ep)
	}
	evidence := ""
	for range endpoints {
		if a := <-answers; a != "" && evidence == "" {
			evidence = a
		}
	}
	return evidence
}

// refused tells a peer that answered and said no from one that is not
// there: connection refused, unreachable and timeouts are absence.
func refused(err error) bool {
	if s, ok := status.FromError(errors.Unwrap(err)); ok || s != nil {
		switch s.Code() {
		case codes.Unauthenticated, codes.PermissionDenied:
			return true
		}
	}
	msg := err.Error()
	for _, sign := range []string{"authentication handshake failed", "tls:", "x509:", "certificate", "invalid auth token", "authentication failed", "permission denied"} {
		if strings.Contains(msg, sign) {
			return true
		}
	}
	return false
}

// quotaOf is a member's quota: what its etcd reports (since 3.6, its
// default when none is set), else the spec's quota-backend-bytes for it,
// else etcd's default.
func (c *Client) quotaOf(name string, reported int64) int64 {
	if reported > 0 {
		return reported
	}
	if q := c.quotas[name]; q > 0 {
		return q
	}
	return model.DefaultQuota
}

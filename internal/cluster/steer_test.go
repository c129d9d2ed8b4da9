package cluster

import (
	"slices"
	"testing"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
)

func TestSteer(t *testing.T) {
	member := func(url string, mod func(*model.Member)) model.Member {
		m := model.Member{ClientURLs: []string{url}, Leader: 1, CaughtUp: true}
		if mod != nil {
			mod(&m)
		}
		return m
	}
	all := []string{"http://a:2379", "http://b:2379", "http://c:2379"}
	for _, tc := range []struct {
		name    string
		members []model.Member
		want    []string
	}{
		{"all keep up", []model.Member{member(all[0], nil), member(all[1], nil), member(all[2], nil)}, all},
		{"a frozen member is left out", []model.Member{member(all[0], nil), member(all[1], nil),
			member(all[2], func(m *model.Member) { m.CaughtUp = false })}, all[:2]},
		{"a member whose status failed", []model.Member{member(all[0], func(m *model.Member) { m.Err = "context deadline exceeded" }),
			member(all[1], nil), member(all[2], nil)}, all[1:]},
		{"a member without a leader", []model.Member{member(all[0], nil), member(all[1], func(m *model.Member) { m.Leader = 0 }),
			member(all[2], nil)}, []string{all[0], all[2]}},
		{"a learner", []model.Member{member(all[0], nil), member(all[1], nil),
			member(all[2], func(m *model.Member) { m.IsLearner = true })}, all[:2]},
		{"an endpoint no member has is kept", []model.Member{member(all[0], func(m *model.Member) { m.Err = "refused" })},
			all[1:]},
		{"none keeps up: every endpoint", []model.Member{member(all[0], func(m *model.Member) { m.Err = "x" }),
			member(all[1], func(m *model.Member) { m.Leader = 0 }), member(all[2], func(m *model.Member) { m.CaughtUp = false })}, all},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := steer(all, model.Cluster{Members: tc.members})
			if !slices.Equal(got, tc.want) {
				t.Errorf("steer = %v, want %v", got, tc.want)
			}
		})
	}
}

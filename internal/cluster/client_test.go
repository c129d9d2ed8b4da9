package cluster

import (
	"context"
	"strings"
	"testing"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
)

// TestAddLearner: the added member comes back as an unstarted learner, in
// a member list that also holds the running member, both as plain values.
func TestAddLearner(t *testing.T) {
	peer, learnerURL, m, all := addedLearner(t)
	if !m.IsLearner || !m.Unstarted() || m.ID == 0 || len(m.PeerURLs) != 1 || m.PeerURLs[0] != learnerURL {
		t.Errorf("added member = %+v, want an unstarted learner at %s", m, learnerURL)
	}
	byPeer := map[string]bool{}
	for _, x := range all {
		byPeer[x.PeerURLs[0]] = x.Name != "" && !x.IsLearner
	}
	if len(all) != 2 || !byPeer[peer] || byPeer[learnerURL] {
		t.Errorf("member list = %+v, want the running voter at %s and the new learner", all, peer)
	}
}

// addedLearner starts a real etcd and adds a learner through Client: the
// etcd's peer URL, the learner's, the added member and the member list.
func addedLearner(t *testing.T) (peer, learnerURL string, added model.Member, all []model.Member) {
	t.Helper()
	ep, peer := startEtcdURLs(t)
	c, err := Dial([]string{ep}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	u := freeURL(t)
	learnerURL = u.String()
	added, all, err = c.AddLearner(context.Background(), []string{learnerURL})
	if err != nil {
		t.Fatal(err)
	}
	return peer, learnerURL, added, all
}

// TestRemoveConfirmsNotFound: removing a member that is gone is success
// only when the member list of the cluster meant confirms it.
func TestRemoveConfirmsNotFound(t *testing.T) {
	ep, _ := startEtcdURLs(t)
	c, err := Dial([]string{ep}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	id, _, err := c.Members(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const gone = 0x1234
	if err := c.Remove(ctx, id, gone); err != nil {
		t.Errorf("removing a member this cluster does not list: %v, want success", err)
	}
	if err := c.Remove(ctx, id+1, gone); err == nil || !strings.Contains(err.Error(), "which is not cluster") {
		t.Errorf("removing from another cluster's ID: %v, want a refusal", err)
	}
}

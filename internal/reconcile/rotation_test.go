package reconcile

import (
	"strings"
	"testing"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
)

func TestRotateCA(t *testing.T) {
	const o, n = "old", "new"
	both := []string{o, n}
	trusting := func(running, files, issuers []string) *model.CATrust {
		return &model.CATrust{Running: running, Files: files, Issuers: issuers}
	}
	start := trusting([]string{o}, []string{o}, []string{o})
	trusts := trusting(both, both, []string{o})         // phase 1 done here
	reissued := trusting(both, both, []string{n})       // phase 2 done here
	dropped := trusting(both, []string{n}, []string{n}) // files dropped, restart pending
	done := trusting([]string{n}, []string{n}, []string{n})
	for _, tt := range []struct {
		name    string
		hosts   map[string]*model.CATrust
		wait    bool
		ready   int // 1: the clients trust, 2: and present the new CA's
		want    RotationStep
		because string
	}{
		{"no rotation", map[string]*model.CATrust{"a": start}, false, 0, RotateNone, ""},
		{"start: trust both, whatever the others", map[string]*model.CATrust{"a": start}, false, 0, RotateTrust, "beside the old"},
		{"files trust both, etcd not restarted: wait for self", map[string]*model.CATrust{"a": trusting([]string{o}, both, []string{o}), "b": trusts, "c": trusts}, false, 0, RotateWait, "a's etcd does not trust"},
		{"a member behind: wait", map[string]*model.CATrust{"a": trusts, "b": trusts, "c": start}, false, 0, RotateWait, "c's etcd does not trust"},
		{"a member down: wait", map[string]*model.CATrust{"a": trusts, "b": trusts}, false, 0, RotateWait, "c has no record"},
		{"all trust: reissue", map[string]*model.CATrust{"a": trusts, "b": trusts, "c": trusts}, false, 0, RotateReissue, "issued by it"},
		{"all trust, clients awaited", map[string]*model.CATrust{"a": trusts, "b": trusts, "c": trusts}, true, 0, RotateWait, "--clients-ready"},
		{"all reissued, clients' certificates awaited", map[string]*model.CATrust{"a": reissued, "b": reissued, "c": reissued}, true, 1, RotateWait, "once more"},
		{"all reissued, clients ready twice", map[string]*model.CATrust{"a": reissued, "b": reissued, "c": reissued}, true, 2, RotateDrop, ""},
		{"another CA the files trust is left alone", map[string]*model.CATrust{"a": trusting([]string{n, "other"}, []string{n, "other"}, []string{n, "other"}), "b": done, "c": done}, false, 0, RotateDone, ""},
		{"all trust, clients ready", map[string]*model.CATrust{"a": trusts, "b": trusts, "c": trusts}, true, 1, RotateReissue, ""},
		{"reissued, another still old: wait", map[string]*model.CATrust{"a": reissued, "b": reissued, "c": trusts}, false, 0, RotateWait, "c's certificates are not all"},
		{"reissued, a member down: wait", map[string]*model.CATrust{"a": reissued, "b": reissued}, false, 0, RotateWait, "c has no record"},
		{"all reissued: drop", map[string]*model.CATrust{"a": reissued, "b": reissued, "c": reissued}, false, 0, RotateDrop, "drop the old one"},
		{"a partly reissued member holds the drop", map[string]*model.CATrust{"a": reissued, "b": reissued, "c": trusting(both, both, []string{n, o})}, false, 0, RotateWait, "c's certificates"},
		{"dropped: restart pending", map[string]*model.CATrust{"a": dropped, "b": reissued, "c": reissued}, false, 0, RotateWait, "still trusts the old"},
		{"done here", map[string]*model.CATrust{"a": done, "b": dropped, "c": reissued}, false, 0, RotateDone, ""},
		{"killed after the drop on another host: this one still drops", map[string]*model.CATrust{"a": reissued, "b": done, "c": dropped}, false, 0, RotateDrop, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			next := n
			if tt.want == RotateNone {
				next = ""
			}
			got := RotateCA(RotationInput{Next: next, Old: []string{o}, Self: "a", Members: []string{"a", "b", "c"}, Hosts: tt.hosts,
				WaitForClients: tt.wait, ClientsTrust: tt.ready >= 1, ClientsCerts: tt.ready >= 2})
			if got.Step != tt.want || !strings.Contains(got.Why, tt.because) {
				t.Errorf("got %v (%s), want %v (…%s…)", got.Step, got.Why, tt.want, tt.because)
			}
		})
	}
}

// TestRotateCANeverMixes: over every combination of the three hosts'
// states, a reissue happens only when every member's running etcd trusts
// the new CA, and a drop only when every member presents only the new CA's
// certificates: no member ever presents a certificate another does not
// trust, nor stops trusting one still presented.
func TestRotateCANeverMixes(t *testing.T) {
	const o, n = "old", "new"
	sets := [][]string{{o}, {o, n}, {n}}
	var states []*model.CATrust
	for _, r := range sets {
		for _, f := range sets {
			for _, i := range sets {
				states = append(states, &model.CATrust{Running: r, Files: f, Issuers: i})
			}
		}
	}
	has := func(ids []string, id string) bool { return strings.Contains(strings.Join(ids, ","), id) }
	checked := 0
	for _, a := range states {
		for _, b := range states {
			for _, c := range states {
				hosts := map[string]*model.CATrust{"a": a, "b": b, "c": c}
				got := RotateCA(RotationInput{Next: n, Old: []string{o}, Self: "a", Members: []string{"a", "b", "c"}, Hosts: hosts})
				checked++
				for name, h := range hosts {
					if got.Step == RotateReissue && !has(h.Running, n) {
						t.Fatalf("reissue while %s's etcd trusts %v: %+v %+v %+v", name, h.Running, a, b, c)
					}
					if got.Step == RotateDrop && (has(h.Issuers, o) || len(h.Issuers) == 0) {
						t.Fatalf("drop while %s presents %v: %+v %+v %+v", name, h.Issuers, a, b, c)
					}
				}
			}
		}
	}
	t.Logf("%d combinations of three hosts checked", checked)
}

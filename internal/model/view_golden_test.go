package model

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// viewInputs is one case's observation: testdata/view/<case>/inputs.json.
type viewInputs struct {
	Cluster Cluster       `json:"cluster"`
	Agents  []AgentRecord `json:"agents,omitempty"`
}

// goldenView is the whole derived state of a case, guards included: what
// every rule reads (raft-autopilot's state.json.golden is the model).
type goldenView struct {
	Leader           uint64         `json:"leader"`
	Voters           int            `json:"voters"`
	Serving          int            `json:"serving"`
	CaughtUp         int            `json:"caughtUp"`
	Quorum           int            `json:"quorum"`
	FailureTolerance int            `json:"failureTolerance"`
	NoSpace          bool           `json:"noSpace"`
	HasQuorum        guard          `json:"hasQuorum"`
	Disrupted        []Disruption   `json:"disrupted"`
	Guards           []memberGuards `json:"guards"`
}

type guard struct {
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

type memberGuards struct {
	ID            uint64 `json:"id"`
	Name          string `json:"name"`
	ReadyToRemove guard  `json:"readyToRemove"`
	ReadyToStop   guard  `json:"readyToStop"`
	ServesWithout guard  `json:"servesWithout"`
}

func guardOf(ok bool, detail string) guard { return guard{ok, detail} }

// TestViewGolden: each case's observation, derived into its view and
// every member's guards, matches view.json.golden (go test -update
// rewrites them).
func TestViewGolden(t *testing.T) {
	cases, err := filepath.Glob("testdata/view/*/inputs.json")
	if err != nil || len(cases) == 0 {
		t.Fatalf("no cases under testdata/view: %v", err)
	}
	for _, in := range cases {
		dir := filepath.Dir(in)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			b, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			var inputs viewInputs
			if err := json.Unmarshal(b, &inputs); err != nil {
				t.Fatalf("%s: %v", in, err)
			}
			v := NewView(inputs.Cluster, inputs.Agents)
			g := goldenView{Leader: v.Leader, Voters: v.Voters, Serving: v.Serving, CaughtUp: v.CaughtUp, Quorum: v.Quorum,
				FailureTolerance: v.FailureTolerance, NoSpace: v.NoSpace, HasQuorum: guardOf(v.HasQuorum()), Disrupted: v.Disrupted}
			for _, m := range v.Members() {
				g.Guards = append(g.Guards, memberGuards{ID: m.ID, Name: m.Name, ReadyToRemove: guardOf(v.ReadyToRemove(m.ID)),
					ReadyToStop: guardOf(v.ReadyToStop(m.ID)), ServesWithout: guardOf(v.ServesWithout(m.ID))})
			}
			got, err := json.MarshalIndent(g, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			golden := filepath.Join(dir, "view.json.golden")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (go test ./internal/model -run TestViewGolden -update writes it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs from the view derived now:\n%s", golden, got)
			}
		})
	}
}

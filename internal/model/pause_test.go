package model

import "testing"

// TestPauseResumed: a resume ends the pause it reached and no other,
// whatever the revisions did since (G5).
func TestPauseResumed(t *testing.T) {
	tests := []struct {
		name  string
		pause *Pause
		mark  ResumeMark
		want  bool
	}{
		{"no pause", nil, ResumeMark{ID: "a", Revision: 5}, false},
		{"the pause resumed", &Pause{ID: "a", Revision: 5, ClusterID: 1}, ResumeMark{ID: "a", Revision: 5, ClusterID: 1}, true},
		{"the same pause brought back by a recovery, at another revision", &Pause{ID: "a", Revision: 3, ClusterID: 2}, ResumeMark{ID: "a", Revision: 5, ClusterID: 1}, true},
		{"a new pause at a lower revision", &Pause{ID: "b", Revision: 3, ClusterID: 1}, ResumeMark{ID: "a", Revision: 5, ClusterID: 1}, false},
		{"a new pause at a higher revision", &Pause{ID: "b", Revision: 9, ClusterID: 1}, ResumeMark{ID: "a", Revision: 5, ClusterID: 1}, false},
		{"an old pause without ID, resumed at its revision", &Pause{Revision: 5, ClusterID: 1}, ResumeMark{Revision: 5, ClusterID: 1}, true},
		{"an old pause without ID below the mark", &Pause{Revision: 4, ClusterID: 1}, ResumeMark{Revision: 5, ClusterID: 1}, false},
		{"an old pause of another cluster", &Pause{Revision: 5, ClusterID: 2}, ResumeMark{Revision: 5, ClusterID: 1}, false},
		{"a mark from before marks had IDs, a new pause", &Pause{ID: "b", Revision: 5, ClusterID: 1}, ResumeMark{Revision: 5}, false},
		{"no mark", &Pause{Revision: 5}, ResumeMark{}, false},
		{"a local pause is ended by removing it, not by a mark", &Pause{Local: true}, ResumeMark{}, false},
	}
	for _, tt := range tests {
		if got := tt.pause.Resumed(tt.mark); got != tt.want {
			t.Errorf("%s: Resumed = %v, want %v", tt.name, got, tt.want)
		}
	}
}

package model

import (
	"math"
	"testing"
	"time"
)

func TestHistogramQuantile(t *testing.T) {
	inf := math.Inf(1)
	bounds := []float64{0.001, 0.002, 0.004, 0.008, inf}
	cases := []struct {
		name   string
		counts []uint64
		q      float64
		want   time.Duration
	}{
		{"empty", []uint64{0, 0, 0, 0, 0}, 0.99, 0},
		{"all in the first bucket", []uint64{100, 100, 100, 100, 100}, 0.99, 990 * time.Microsecond},
		{"p99 in the third bucket", []uint64{90, 98, 100, 100, 100}, 0.99, 3 * time.Millisecond},
		{"p50 in the first", []uint64{90, 98, 100, 100, 100}, 0.5, 555555},
		{"beyond the last finite bound", []uint64{0, 0, 0, 50, 100}, 0.99, 8 * time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := Histogram{Bounds: bounds, Counts: tc.counts, Count: tc.counts[len(tc.counts)-1]}
			if got := h.Quantile(tc.q); got != tc.want {
				t.Errorf("Quantile(%v) = %v, want %v", tc.q, got, tc.want)
			}
		})
	}
}

func TestHistogramSince(t *testing.T) {
	inf := math.Inf(1)
	old := Histogram{Bounds: []float64{0.001, inf}, Counts: []uint64{10, 12}, Count: 12}
	now := Histogram{Bounds: []float64{0.001, inf}, Counts: []uint64{10, 22}, Count: 22}
	d := now.Since(old)
	if d.Count != 10 || d.Counts[0] != 0 || d.Counts[1] != 10 {
		t.Errorf("since: %+v, want 10 observations, all above 1ms", d)
	}
	if got := d.Quantile(0.99); got != 1*time.Millisecond {
		t.Errorf("p99 of the window %v, want 1ms (the highest finite bound)", got)
	}
	restarted := Histogram{Bounds: []float64{0.001, inf}, Counts: []uint64{3, 3}, Count: 3}
	if d := restarted.Since(old); d.Count != 3 {
		t.Errorf("after a restart the window is the new counts: %+v", d)
	}
	other := Histogram{Bounds: []float64{0.002, inf}, Counts: []uint64{30, 30}, Count: 30}
	if d := other.Since(old); d.Count != 30 {
		t.Errorf("other bounds: the window is the new counts: %+v", d)
	}
}

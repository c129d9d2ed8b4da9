package model

import (
	"math"
	"time"
)

// Histogram is a Prometheus histogram as etcd exports it: cumulative
// counts of observations at or below each upper bound (in seconds, the
// last one +Inf), and the count of all of them.
type Histogram struct {
	Bounds []float64
	Counts []uint64
	Count  uint64
}

// Since is what was observed between old and h: the difference of the
// counts. An older histogram with other bounds, or with more observations
// (the process restarted, its counters began again), is no base: h itself
// is then what was observed since.
func (h Histogram) Since(old Histogram) Histogram {
	if len(old.Bounds) != len(h.Bounds) || old.Count > h.Count {
		return h
	}
	d := Histogram{Bounds: h.Bounds, Counts: make([]uint64, len(h.Counts)), Count: h.Count - old.Count}
	for i := range h.Counts {
		if h.Bounds[i] != old.Bounds[i] || old.Counts[i] > h.Counts[i] {
			return h
		}
		d.Counts[i] = h.Counts[i] - old.Counts[i]
	}
	return d
}

// Quantile is the q-quantile of the observations (0 < q < 1), as
// Prometheus's histogram_quantile estimates it: linear within the bucket
// it falls in; the highest finite bound when it falls in +Inf's; 0 with no
// observation.
func (h Histogram) Quantile(q float64) time.Duration {
	if h.Count == 0 || len(h.Bounds) == 0 {
		return 0
	}
	rank := q * float64(h.Count)
	lower, below := 0.0, uint64(0)
	for i, upper := range h.Bounds {
		if float64(h.Counts[i]) >= rank {
			if math.IsInf(upper, 1) {
				return seconds(lower)
			}
			in := h.Counts[i] - below
			if in == 0 {
				return seconds(upper)
			}
			return seconds(lower + (upper-lower)*(rank-float64(below))/float64(in))
		}
		lower, below = upper, h.Counts[i]
	}
	return seconds(lower)
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

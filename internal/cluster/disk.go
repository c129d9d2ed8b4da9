package cluster

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
)

// The histograms of etcd's disk, as its /metrics names them.
const (
	walFsyncMetric      = "etcd_disk_wal_fsync_duration_seconds"
	backendCommitMetric = "etcd_disk_backend_commit_duration_seconds"
)

// DiskHistograms reads etcd's own disk histograms from the /metrics
// endpoint etcd serves on endpoint (a client URL: every etcd serves it
// there), with the client's TLS: the WAL fsync and the backend commit
// durations, cumulative since etcd started.
func (c *Client) DiskHistograms(parent context.Context, endpoint string) (wal, commit model.Histogram, err error) {
	ctx, cancel := c.ctx(parent)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(endpoint, "/")+"/metrics", nil)
	if err != nil {
		return wal, commit, fmt.Errorf("etcd's metrics at %s: %w", endpoint, err)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: c.tls, DisableKeepAlives: true}}
	resp, err := hc.Do(req)
	if err != nil {
		return wal, commit, fmt.Errorf("etcd's metrics at %s: %w", endpoint, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return wal, commit, fmt.Errorf("etcd's metrics at %s: %s", endpoint, resp.Status)
	}
	hs, err := parseHistograms(resp.Body, walFsyncMetric, backendCommitMetric)
	if err != nil {
		return wal, commit, fmt.Errorf("etcd's metrics at %s: %w", endpoint, err)
	}
	if hs[walFsyncMetric].Bounds == nil {
		return wal, commit, fmt.Errorf("etcd's metrics at %s: no %s histogram", endpoint, walFsyncMetric)
	}
	return hs[walFsyncMetric], hs[backendCommitMetric], nil
}

// parseHistograms reads the named histograms (without labels other than
// le: etcd's disk histograms have none) from Prometheus's text format.
func parseHistograms(r io.Reader, names ...string) (map[string]model.Histogram, error) {
	out := map[string]model.Histogram{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		for _, name := range names {
			if !strings.HasPrefix(line, name+"_") {
				continue
			}
			h := out[name]
			if err := addSample(&h, strings.TrimPrefix(line, name)); err != nil {
				return nil, fmt.Errorf("%s: %q: %w", name, line, err)
			}
			out[name] = h
		}
	}
	return out, sc.Err()
}

// addSample adds one line of a histogram, its name cut off:
// `_bucket{le="0.001"} 12` or `_count 40` (`_sum` is not needed).
func addSample(h *model.Histogram, rest string) error {
	series, value, ok := strings.Cut(rest, " ")
	if !ok {
		return fmt.Errorf("no value")
	}
	value, _, _ = strings.Cut(strings.TrimSpace(value), " ") // a timestamp may follow
	switch {
	case strings.HasPrefix(series, `_bucket{le="`) && strings.HasSuffix(series, `"}`):
		le := strings.TrimSuffix(strings.TrimPrefix(series, `_bucket{le="`), `"}`)
		bound, err := strconv.ParseFloat(le, 64)
		if le == "+Inf" {
			bound, err = math.Inf(1), nil
		}
		if err != nil {
			return fmt.Errorf("bound: %w", err)
		}
		n, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return fmt.Errorf("count: %w", err)
		}
		h.Bounds = append(h.Bounds, bound)
		h.Counts = append(h.Counts, uint64(n))
	case series == "_count":
		n, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return fmt.Errorf("count: %w", err)
		}
		h.Count = uint64(n)
	}
	return nil
}

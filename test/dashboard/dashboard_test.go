package dashboard

import (
	"slices"
	"testing"
)

// TestSelectors: the metric names and matchers found in PromQL.
func TestSelectors(t *testing.T) {
	for _, c := range []struct {
		expr string
		want []string
	}{
		{`up`, []string{"up{}"}},
		{`max by (member, role) (etcdkeeper_member_role{cluster="$cluster", member=~"$member"}) == 1`,
			[]string{`etcdkeeper_member_role{cluster="$cluster", member=~"$member"}`}},
		{`histogram_quantile(0.99, sum by (member, le) (rate(a_bucket{x="}"}[$__rate_interval])))`, []string{`a_bucket{x="}"}`}},
		{`time() - b{c="d"} > 2 * e and on (instance) f offset 5m`, []string{`b{c="d"}`, "e{}", "f{}"}},
		{`sum without (le) (rate(g[1m])) / ignoring(x) group_left (y) h`, []string{"g{}", "h{}"}},
		{`1e3 * count_values("v", i)`, []string{"i{}"}},
	} {
		var got []string
		for _, s := range Selectors(c.expr) {
			got = append(got, s.Metric+"{"+s.Matchers+"}")
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("Selectors(%q) = %q, want %q", c.expr, got, c.want)
		}
	}
}

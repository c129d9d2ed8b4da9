// Package dashboard reads the Grafana dashboard packaging/grafana
// ships, for its tests: the panels and their PromQL, the template
// variables, and the metric selectors in an expression.
package dashboard

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// Dashboard is the part of Grafana's dashboard JSON the tests read.
type Dashboard struct {
	Title         string  `json:"title"`
	UID           string  `json:"uid"`
	SchemaVersion int     `json:"schemaVersion"`
	Rows          []Panel `json:"panels"`
	Templating    struct {
		List []Variable `json:"list"`
	} `json:"templating"`
}

// Panel is a panel, or a row (Type "row") with, when collapsed, its
// panels inside.
type Panel struct {
	ID          int        `json:"id"`
	Type        string     `json:"type"`
	Title       string     `json:"title"`
	Description string     `json:"description"`
	Datasource  Datasource `json:"datasource"`
	GridPos     struct {
		X, Y, W, H int
	} `json:"gridPos"`
	Targets []Target `json:"targets"`
	Panels  []Panel  `json:"panels"`
}

// Target is one query of a panel.
type Target struct {
	RefID        string     `json:"refId"`
	Expr         string     `json:"expr"`
	LegendFormat string     `json:"legendFormat"`
	Datasource   Datasource `json:"datasource"`
}

// Datasource names the data source of a panel or query.
type Datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// Variable is a template variable. Query is a string for the data source
// variable and a label_values(...) query for the others.
type Variable struct {
	Name  string `json:"name"`
	Type  string `json:"type"`
	Query string `json:"query"`
}

// Load reads a dashboard file.
func Load(path string) (*Dashboard, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read dashboard: %w", err)
	}
	var d Dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &d, nil
}

// Panels is every panel that queries, rows left out, collapsed rows'
// panels included, in the file's order.
func (d *Dashboard) Panels() []Panel {
	var out []Panel
	var walk func([]Panel)
	walk = func(ps []Panel) {
		for _, p := range ps {
			if p.Type == "row" {
				walk(p.Panels)
				continue
			}
			out = append(out, p)
		}
	}
	walk(d.Rows)
	return out
}

var labelValues = regexp.MustCompile(`^label_values\((.+),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$`)

// LabelValues splits a label_values(SELECTOR, LABEL) variable query.
func (v Variable) LabelValues() (selector, label string, err error) {
	m := labelValues.FindStringSubmatch(strings.TrimSpace(v.Query))
	if m == nil {
		return "", "", fmt.Errorf("query %q is not label_values(SELECTOR, LABEL)", v.Query)
	}
	return strings.TrimSpace(m[1]), m[2], nil
}

// Selector is a metric name in an expression and its label matchers (the
// text between the braces, "" without).
type Selector struct {
	Metric   string
	Matchers string
}

// PromQL words that are not metric names: binary and set operators,
// modifiers, and aggregations (which may have by/without before their
// parenthesis).
var keywords = map[string]bool{
	"and": true, "or": true, "unless": true, "bool": true, "offset": true, "atan2": true,
	"sum": true, "min": true, "max": true, "avg": true, "count": true, "group": true,
	"stddev": true, "stdvar": true, "topk": true, "bottomk": true, "quantile": true, "count_values": true,
}

// labelLists are the words followed by a parenthesised list of labels.
var labelLists = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}

// Selectors finds the metric selectors in a PromQL expression: every
// identifier that is not a function (followed by "("), a keyword, a label
// list, a number, a string, a duration or inside braces.
func Selectors(expr string) []Selector {
	var out []Selector
	i := 0
	for i < len(expr) {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			i = skipString(expr, i)
		case c == '[':
			i = skipTo(expr, i, ']')
		case c == '{':
			i = skipTo(expr, i, '}')
		case c >= '0' && c <= '9' || c == '.':
			for i < len(expr) && isIdent(expr[i]) || i < len(expr) && expr[i] == '.' {
				i++
			}
		case isIdentStart(c):
			start := i
			for i < len(expr) && isIdent(expr[i]) {
				i++
			}
			word := expr[start:i]
			next := skipSpace(expr, i)
			switch {
			case labelLists[word] && next < len(expr) && expr[next] == '(':
				i = skipTo(expr, next, ')')
			case keywords[word]:
			case next < len(expr) && expr[next] == '(':
			default:
				s := Selector{Metric: word}
				if next < len(expr) && expr[next] == '{' {
					end := skipTo(expr, next, '}')
					s.Matchers = expr[next+1 : end-1]
					i = end
				}
				out = append(out, s)
			}
		default:
			i++
		}
	}
	return out
}

func isIdentStart(c byte) bool {
	return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isIdent(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }

func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n') {
		i++
	}
	return i
}

// skipString returns the index after the string starting at i.
func skipString(s string, i int) int {
	q := s[i]
	for i++; i < len(s); i++ {
		if s[i] == '\\' && q != '`' {
			i++
			continue
		}
		if s[i] == q {
			return i + 1
		}
	}
	return len(s)
}

// skipTo returns the index after the close that ends the group opening at
// i, skipping strings and nested groups of the same kind.
func skipTo(s string, i int, close byte) int {
	open := s[i]
	depth := 0
	for i < len(s) {
		switch s[i] {
		case '"', '\'', '`':
			i = skipString(s, i)
			continue
		case open:
			depth++
		case close:
			depth--
			if depth == 0 {
				return i + 1
			}
		}
		i++
	}
	return len(s)
}

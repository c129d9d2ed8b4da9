package spec

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Maintenance configures the work the agents do on a healthy cluster
// (maintenance:).
type Maintenance struct {
	Defrag  Defrag  `yaml:"defrag"`
	NoSpace NoSpace `yaml:"nospace"`
	// MaxDisrupted is how many members the agents may take out of
	// service at once for a voluntary disruption (a rolling restart, a
	// defragmentation): 1, or more in a cluster of 5 or more, never more
	// than its failure tolerance ((members-1)/2); the caught-up others
	// must still be a quorum of every voter, and a host turn is always
	// the one member out of service (reconcile's budget).
	MaxDisrupted int `yaml:"maxDisrupted"`
	// HostTurnTimeout is how long a host turn (etcdkeeper guard,
	// maintenance start) may go unrenewed by its holder's agent before
	// the others release it: a host that never came back from its reboot.
	HostTurnTimeout Duration `yaml:"hostTurnTimeout"`
}

// NoSpace is the NOSPACE procedure (maintenance.nospace): what the agents
// do when etcd raised its NOSPACE alarm (docs/space.md).
type NoSpace struct {
	// Compact: compact to the current revision first, as etcd's own
	// NOSPACE procedure does; nil (not given) means true.
	Compact *bool `yaml:"compact"`
}

// Compacts: the procedure compacts first.
func (n NoSpace) Compacts() bool { return n.Compact == nil || *n.Compact }

// Defrag is the defragmentation policy (maintenance.defrag): a member is
// defragmented, one at a time, when at least MinFreeRatio of its db file
// and at least MinFreeBytes would be freed, inside Window.
type Defrag struct {
	// Enabled: nil (not given) means true.
	Enabled      *bool  `yaml:"enabled"`
	MinFreeRatio Ratio  `yaml:"minFreeRatio"`
	MinFreeBytes Size   `yaml:"minFreeBytes"`
	Window       Window `yaml:"window"`
	// Offline: a follower whose agent runs is defragmented by that agent
	// with its etcd stopped (graceful stop, rewrite of the db, start,
	// catch up) rather than online; nil (not given) means true
	// (docs/space.md says when each way is taken).
	Offline *bool `yaml:"offline"`
}

// On: the policy is enabled.
func (d Defrag) On() bool { return d.Enabled == nil || *d.Enabled }

// OfflineOn: members may be defragmented offline.
func (d Defrag) OfflineOn() bool { return d.Offline == nil || *d.Offline }

// Ratio is a fraction from 0 to 1.
type Ratio float64

// Size is a number of bytes, written 256MiB, 1GiB, 512KiB, 100B or 1048576.
type Size int64

var sizeRE = regexp.MustCompile(`^([0-9]+)\s*(B|KiB|MiB|GiB|TiB)?$`)

var sizeUnits = map[string]int64{"": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}

// ParseSize reads a size: whole bytes with an optional binary unit.
func ParseSize(s string) (Size, error) {
	m := sizeRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, fmt.Errorf("%s is not a size: write bytes, or a whole number with B, KiB, MiB or GiB, e.g. 256MiB", quote(s))
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	unit := sizeUnits[m[2]]
	if err != nil || n > math.MaxInt64/unit {
		return 0, fmt.Errorf("%s is too large", quote(s))
	}
	return Size(n * unit), nil
}

// String writes the size in the largest unit that divides it.
func (s Size) String() string {
	for _, u := range []string{"TiB", "GiB", "MiB", "KiB"} {
		if v := sizeUnits[u]; s != 0 && int64(s)%v == 0 {
			return fmt.Sprintf("%d%s", int64(s)/v, u)
		}
	}
	return fmt.Sprintf("%dB", int64(s))
}

// MarshalYAML writes the size the way ParseSize reads it.
func (s Size) MarshalYAML() (any, error) { return s.String(), nil }

// Window is a time window maintenance may run in: every day
// ("02:00-05:00 UTC") or on one weekday ("Sat 02:00-05:00 UTC"); it may
// cross midnight ("23:00-01:00 UTC" ends the next day). The zero Window
// is any time.
type Window struct {
	Raw string
	// Day is the weekday the window starts on, unless Daily.
	Day   time.Weekday
	Daily bool
	// Start and End are minutes after midnight in Loc.
	Start, End int
	Loc        *time.Location
}

// Any: no window, maintenance may run at any time.
func (w Window) Any() bool { return w.Raw == "" }

func (w Window) String() string { return w.Raw }

// MarshalYAML writes the window as it was written.
func (w Window) MarshalYAML() (any, error) { return w.Raw, nil }

var windowRE = regexp.MustCompile(`^(?:([A-Za-z]{3})\s+)?([0-9]{2}):([0-9]{2})-([0-9]{2}):([0-9]{2})\s+(\S+)$`)

var weekdays = map[string]time.Weekday{"sun": time.Sunday, "mon": time.Monday, "tue": time.Tuesday, "wed": time.Wednesday,
	"thu": time.Thursday, "fri": time.Friday, "sat": time.Saturday}

// ParseWindow reads "[Day ]HH:MM-HH:MM ZONE"; "" is any time.
func ParseWindow(s string) (Window, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Window{}, nil
	}
	const want = `write "[Day ]HH:MM-HH:MM ZONE", e.g. "Sat 02:00-05:00 UTC" or "02:00-05:00 Europe/Berlin" (daily)`
	m := windowRE.FindStringSubmatch(s)
	if m == nil {
		return Window{}, fmt.Errorf("%s is not a window: %s", quote(s), want)
	}
	w := Window{Raw: s, Daily: m[1] == ""}
	if !w.Daily {
		d, ok := weekdays[strings.ToLower(m[1])]
		if !ok {
			return Window{}, fmt.Errorf("%s: %s is not a day: use Mon, Tue, Wed, Thu, Fri, Sat or Sun", quote(s), quote(m[1]))
		}
		w.Day = d
	}
	var ok1, ok2 bool
	w.Start, ok1 = clock(m[2], m[3])
	w.End, ok2 = clock(m[4], m[5])
	if !ok1 || !ok2 {
		return Window{}, fmt.Errorf("%s: hours run from 00 to 23 (24:00 for the end of the day), minutes from 00 to 59", quote(s))
	}
	if w.Start == w.End {
		return Window{}, fmt.Errorf("%s: the window is empty: its start and end are the same time", quote(s))
	}
	loc, err := time.LoadLocation(m[6])
	if err != nil || m[6] == "Local" {
		return Window{}, fmt.Errorf("%s: %s is not a time zone: use UTC or a zone name such as Europe/Berlin", quote(s), quote(m[6]))
	}
	w.Loc = loc
	return w, nil
}

func clock(h, m string) (int, bool) {
	hh, _ := strconv.Atoi(h)
	mm, _ := strconv.Atoi(m)
	if mm > 59 || hh > 24 || (hh == 24 && mm != 0) {
		return 0, false
	}
	return hh*60 + mm, true
}

// Contains reports whether t is inside the window.
func (w Window) Contains(t time.Time) bool {
	if w.Any() {
		return true
	}
	t = t.In(w.Loc)
	now := t.Hour()*60 + t.Minute()
	day := t.Weekday()
	if w.Start < w.End {
		return now >= w.Start && now < w.End && (w.Daily || day == w.Day)
	}
	// Across midnight: the evening part on the start day, the morning
	// part on the day after.
	if now >= w.Start {
		return w.Daily || day == w.Day
	}
	return now < w.End && (w.Daily || day == (w.Day+1)%7)
}

// Defaults of maintenance.defrag.
const (
	defaultMinFreeRatio = 0.5
	defaultMinFreeBytes = 256 << 20
)

func (d *doc) defaultMaintenance(m *Maintenance) {
	if m.Defrag.Enabled == nil {
		on := true
		m.Defrag.Enabled = &on
	}
	if !d.given["maintenance.defrag.minFreeRatio"] {
		m.Defrag.MinFreeRatio = defaultMinFreeRatio
	}
	if !d.given["maintenance.defrag.minFreeBytes"] {
		m.Defrag.MinFreeBytes = defaultMinFreeBytes
	}
	if !d.given["maintenance.maxDisrupted"] {
		m.MaxDisrupted = 1
	}
	d.defaultDuration("maintenance.hostTurnTimeout", &m.HostTurnTimeout, defaultHostTurnTimeout)
}

// defaultHostTurnTimeout is maintenance.hostTurnTimeout's default: longer
// than a server's reboot (firmware, RAID and memory checks take minutes),
// short enough that a host that died in its turn does not hold the
// others' patching for a day.
const defaultHostTurnTimeout = 15 * time.Minute

// SteadyInterval is the agent loop's longest period while nothing needs
// it: a pass comes every agent.interval, or every SteadyInterval when
// that is longer and the cluster is as the spec wants it.
const SteadyInterval = 5 * time.Second

// TurnRenewals is how many renewals of a live host turn must fit in
// maintenance.hostTurnTimeout: its holder's agent renews it at its
// passes, every min(30s, a quarter of the timeout) at best, later by up
// to a pass; the others release it once they have seen it unchanged for
// the timeout. Four passes leave half the timeout for a slow pass.
const TurnRenewals = 4

// checkMaintenance: maintenance.maxDisrupted is at least 1 and at most
// the failure tolerance of the spec's members.
func (d *doc) checkMaintenance(s *Spec) {
	const p = "maintenance.maxDisrupted"
	if !d.given[p] || d.broken[p] {
		return
	}
	v := s.Maintenance.MaxDisrupted
	if tolerance := (len(s.Members) - 1) / 2; v < 1 || (v > 1 && v > tolerance) {
		d.errorf(d.line(p), "%s: %d: must be 1, or at most the failure tolerance of the spec's %d members (%d): more members out of service at once would leave no quorum to fail over to",
			p, v, len(s.Members), max(1, tolerance))
	}
}

// checkHostTurnTimeout: maintenance.hostTurnTimeout is at least
// TurnRenewals of the holder agent's passes, or the others would release
// a live turn. The error points at the line to change: the timeout when
// given, else agent.interval. After the defaults: either may be one.
func (d *doc) checkHostTurnTimeout(s *Spec) {
	const p = "maintenance.hostTurnTimeout"
	if d.broken[p] || d.broken["agent.interval"] || s.Agent.Interval.Duration <= 0 {
		return
	}
	timeout, interval := s.Maintenance.HostTurnTimeout.Duration, s.Agent.Interval.Duration
	pass := max(interval, SteadyInterval)
	need := TurnRenewals * pass
	orInterval := ""
	if interval > SteadyInterval {
		orInterval = fmt.Sprintf(", or an agent.interval of at most %s", max(SteadyInterval, timeout/TurnRenewals))
	}
	switch {
	case timeout >= need:
	case d.given[p]:
		d.errorf(d.line(p), "%s: %s: the holder's agent renews its turn at its passes, which may come %s apart (the longer of agent.interval and %s), and the other agents release a turn they have seen unrenewed this long: with fewer than %d passes in it they would release live turns; give at least %s%s (the default, 15m, outlasts a server's reboot)",
			p, timeout, pass, SteadyInterval, TurnRenewals, need, orInterval)
	default:
		d.errorf(d.line("agent.interval", "agent"), "agent.interval: %s: the holder of a host turn renews it at its passes, so %s (%s, the default) must be at least %s (%d passes), or the other agents would release live turns: give %s: %s or more%s",
			interval, p, timeout, need, TurnRenewals, p, need, orInterval)
	}
}

func (d *doc) ratio(dst *Ratio) field {
	return func(path string, n *yaml.Node) {
		n = resolve(n)
		if isNull(n) {
			return
		}
		var v float64
		if n.Kind != yaml.ScalarNode || (n.Tag != "!!float" && n.Tag != "!!int") || n.Decode(&v) != nil || v < 0 || v > 1 || math.IsNaN(v) {
			d.errorf(n.Line, "%s: must be a fraction from 0 to 1, e.g. 0.5 (half of the db file free), found %s", path, describe(n))
			d.broken[path] = true
			return
		}
		*dst = Ratio(v)
	}
}

func (d *doc) size(dst *Size) field {
	return func(path string, n *yaml.Node) {
		n = resolve(n)
		if isNull(n) {
			return
		}
		if n.Kind != yaml.ScalarNode {
			d.wrongShape(n, path, "a size such as 256MiB")
			return
		}
		v, err := ParseSize(n.Value)
		if err != nil {
			d.errorf(n.Line, "%s: %v", path, err)
			d.broken[path] = true
			return
		}
		*dst = v
	}
}

func (d *doc) window(dst *Window) field {
	return func(path string, n *yaml.Node) {
		n = resolve(n)
		if isNull(n) {
			return
		}
		if n.Kind != yaml.ScalarNode {
			d.wrongShape(n, path, `a window such as "Sat 02:00-05:00 UTC"`)
			return
		}
		v, err := ParseWindow(n.Value)
		if err != nil {
			d.errorf(n.Line, "%s: %v", path, err)
			d.broken[path] = true
			return
		}
		*dst = v
	}
}

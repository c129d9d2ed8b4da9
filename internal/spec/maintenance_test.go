package spec

import (
	"strings"
	"testing"
	"time"
)

func TestMaintenanceDefaults(t *testing.T) {
	s, err := Parse([]byte(twoMembers), "spec.yaml")
	if err != nil {
		t.Fatal(err)
	}
	d := s.Maintenance.Defrag
	if !d.On() || d.MinFreeRatio != 0.5 || d.MinFreeBytes != 256<<20 || !d.Window.Any() {
		t.Errorf("defaults: %+v", d)
	}
}

func TestMaintenanceFields(t *testing.T) {
	tests := []struct {
		name, yaml string
		check      func(Defrag) bool
	}{
		{"off", "enabled: false", func(d Defrag) bool { return !d.On() }},
		{"ratio", "minFreeRatio: 0.25", func(d Defrag) bool { return d.MinFreeRatio == 0.25 }},
		{"ratio 1", "minFreeRatio: 1", func(d Defrag) bool { return d.MinFreeRatio == 1 }},
		{"ratio 0", "minFreeRatio: 0", func(d Defrag) bool { return d.MinFreeRatio == 0 }},
		{"MiB", "minFreeBytes: 1MiB", func(d Defrag) bool { return d.MinFreeBytes == 1<<20 }},
		{"GiB", "minFreeBytes: 2GiB", func(d Defrag) bool { return d.MinFreeBytes == 2<<30 }},
		{"KiB", "minFreeBytes: 512KiB", func(d Defrag) bool { return d.MinFreeBytes == 512<<10 }},
		{"B", "minFreeBytes: 100B", func(d Defrag) bool { return d.MinFreeBytes == 100 }},
		{"plain bytes", "minFreeBytes: 1048576", func(d Defrag) bool { return d.MinFreeBytes == 1<<20 }},
		{"zero bytes", "minFreeBytes: 0", func(d Defrag) bool { return d.MinFreeBytes == 0 }},
		{"weekly window", `window: "Sat 02:00-05:00 UTC"`, func(d Defrag) bool {
			return !d.Window.Daily && d.Window.Day == time.Saturday && d.Window.Start == 120 && d.Window.End == 300
		}},
		{"daily window", `window: "02:00-05:00 UTC"`, func(d Defrag) bool { return d.Window.Daily && d.Window.Start == 120 }},
		{"empty window", `window: ""`, func(d Defrag) bool { return d.Window.Any() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse([]byte(twoMembers+"maintenance:\n  defrag:\n    "+tt.yaml+"\n"), "spec.yaml")
			if err != nil {
				t.Fatal(err)
			}
			if !tt.check(s.Maintenance.Defrag) {
				t.Errorf("%s: got %+v", tt.yaml, s.Maintenance.Defrag)
			}
		})
	}
}

func TestNoSpaceFields(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       bool
	}{
		{"default", "", true},
		{"on", "maintenance:\n  nospace:\n    compact: true\n", true},
		{"off", "maintenance:\n  nospace:\n    compact: false\n", false},
		{"empty section", "maintenance:\n  nospace:\n", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse([]byte(twoMembers+tt.yaml), "spec.yaml")
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Maintenance.NoSpace.Compacts(); got != tt.want {
				t.Errorf("compacts: %v, want %v", got, tt.want)
			}
		})
	}
}

func TestNoSpaceErrors(t *testing.T) {
	tests := []struct{ name, yaml, want, msg string }{
		{"unknown key", "    disarm: true", "spec.yaml:7: maintenance.nospace.disarm", "unknown key"},
		{"compact text", "    compact: sometimes", "spec.yaml:7: maintenance.nospace.compact", "true or false"},
		{"compact list", "    compact: [true]", "spec.yaml:7: maintenance.nospace.compact", "true or false"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := parseErrors(t, twoMembers+"maintenance:\n  nospace:\n"+tt.yaml+"\n")
			for _, e := range errs {
				if line := e.Error(); strings.HasPrefix(line, tt.want) && strings.Contains(line, tt.msg) {
					return
				}
			}
			t.Errorf("want %q with %q, got:\n%v", tt.want, tt.msg, errs.Error())
		})
	}
}

func TestMaintenanceErrors(t *testing.T) {
	tests := []struct{ name, yaml, want, msg string }{
		{"unknown key", "    minFree: 1", "spec.yaml:7: maintenance.defrag.minFree", "unknown key"},
		{"unknown section", "    enabled: true\n  compact: true", "spec.yaml:8: maintenance.compact", "unknown key"},
		{"ratio above 1", "    minFreeRatio: 1.5", "spec.yaml:7: maintenance.defrag.minFreeRatio", "fraction from 0 to 1"},
		{"ratio negative", "    minFreeRatio: -0.1", "spec.yaml:7: maintenance.defrag.minFreeRatio", "fraction from 0 to 1"},
		{"ratio text", "    minFreeRatio: half", "spec.yaml:7: maintenance.defrag.minFreeRatio", "fraction from 0 to 1"},
		{"size unit", "    minFreeBytes: 256MB", "spec.yaml:7: maintenance.defrag.minFreeBytes", "is not a size"},
		{"size negative", "    minFreeBytes: -1", "spec.yaml:7: maintenance.defrag.minFreeBytes", "is not a size"},
		{"size fraction", "    minFreeBytes: 1.5GiB", "spec.yaml:7: maintenance.defrag.minFreeBytes", "is not a size"},
		{"size huge", "    minFreeBytes: 99999999999TiB", "spec.yaml:7: maintenance.defrag.minFreeBytes", "too large"},
		{"enabled text", "    enabled: maybe", "spec.yaml:7: maintenance.defrag.enabled", "true or false"},
		{"window garbage", `    window: "at night"`, "spec.yaml:7: maintenance.defrag.window", "is not a window"},
		{"window day", `    window: "Sam 02:00-05:00 UTC"`, "spec.yaml:7: maintenance.defrag.window", "is not a day"},
		{"window hour", `    window: "02:00-25:00 UTC"`, "spec.yaml:7: maintenance.defrag.window", "hours run from"},
		{"window empty", `    window: "02:00-02:00 UTC"`, "spec.yaml:7: maintenance.defrag.window", "is empty"},
		{"window zone", `    window: "02:00-05:00 Mars/Olympus"`, "spec.yaml:7: maintenance.defrag.window", "not a time zone"},
		{"window no zone", `    window: "02:00-05:00"`, "spec.yaml:7: maintenance.defrag.window", "is not a window"},
		{"window list", "    window: [a]", "spec.yaml:7: maintenance.defrag.window", "must be a window"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := parseErrors(t, twoMembers+"maintenance:\n  defrag:\n"+tt.yaml+"\n")
			for _, e := range errs {
				if line := e.Error(); strings.HasPrefix(line, tt.want) && strings.Contains(line, tt.msg) {
					return
				}
			}
			t.Errorf("want %q with %q, got:\n%v", tt.want, tt.msg, errs.Error())
		})
	}
}

func TestWindowContains(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse("Mon 2006-01-02 15:04 MST", s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	tests := []struct {
		window, at string
		in         bool
	}{
		{"", "Sat 2026-12-05 12:00 UTC", true},
		{"Sat 02:00-05:00 UTC", "Sat 2026-12-05 02:00 UTC", true},
		{"Sat 02:00-05:00 UTC", "Sat 2026-12-05 04:59 UTC", true},
		{"Sat 02:00-05:00 UTC", "Sat 2026-12-05 05:00 UTC", false},
		{"Sat 02:00-05:00 UTC", "Sun 2026-12-06 03:00 UTC", false},
		{"Sat 02:00-05:00 UTC", "Sat 2026-12-05 01:59 UTC", false},
		{"02:00-05:00 UTC", "Tue 2026-12-01 03:00 UTC", true},
		{"02:00-05:00 UTC", "Tue 2026-12-01 06:00 UTC", false},
		{"Sat 23:00-01:00 UTC", "Sat 2026-12-05 23:30 UTC", true},
		{"Sat 23:00-01:00 UTC", "Sun 2026-12-06 00:30 UTC", true},
		{"Sat 23:00-01:00 UTC", "Sat 2026-12-05 00:30 UTC", false},
		{"23:00-01:00 UTC", "Tue 2026-12-01 00:30 UTC", true},
		{"02:00-05:00 Europe/Berlin", "Tue 2026-12-01 01:30 UTC", true}, // 02:30 in Berlin (CET)
		{"02:00-05:00 Europe/Berlin", "Tue 2026-12-01 04:30 UTC", false},
		{"22:00-24:00 UTC", "Tue 2026-12-01 23:59 UTC", true},
	}
	for _, tt := range tests {
		w, err := ParseWindow(tt.window)
		if err != nil {
			t.Fatalf("%q: %v", tt.window, err)
		}
		if got := w.Contains(at(tt.at)); got != tt.in {
			t.Errorf("%q contains %s = %v, want %v", tt.window, tt.at, got, tt.in)
		}
	}
}

func TestSizeString(t *testing.T) {
	for in, want := range map[Size]string{256 << 20: "256MiB", 2 << 30: "2GiB", 1000: "1000B", 0: "0B", 1536: "1536B", 3 << 10: "3KiB"} {
		if got := in.String(); got != want {
			t.Errorf("%d: %q, want %q", int64(in), got, want)
		}
		if back, err := ParseSize(want); err != nil || back != in {
			t.Errorf("%q reads back as %d, %v", want, back, err)
		}
	}
}

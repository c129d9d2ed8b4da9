package spec

import (
	"flag"
	"io"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/version"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdmain"
)

// TestMain lets TestEtcdmainFlags run etcd's own command line parser
// (etcdmain.Main) in a child: the test binary, with this variable set.
func TestMain(m *testing.M) {
	if os.Getenv("ETCDKEEPER_TEST_ETCDMAIN") == "1" {
		etcdmain.Main(append([]string{"etcd"}, os.Args[1:]...))
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestEtcdFlagsGenerated: etcdflags_gen.go lists every flag of the etcd
// built into etcdkeeper. If etcd was upgraded, run go generate ./internal/spec.
func TestEtcdFlagsGenerated(t *testing.T) {
	if etcdVersion != version.Version {
		t.Fatalf("etcdflags_gen.go is for etcd %s, etcdkeeper builds etcd %s: run go generate ./internal/spec", etcdVersion, version.Version)
	}
	fs := flag.NewFlagSet("etcd", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	embed.NewConfig().AddFlags(fs)
	embedded := map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) {
		embedded[f.Name] = true
		if !etcdFlags[f.Name] {
			t.Errorf("etcd flag --%s is missing from etcdflags_gen.go: run go generate ./internal/spec", f.Name)
		}
	})
	if len(embedded) < 100 {
		t.Fatalf("embed.Config.AddFlags defined only %d flags", len(embedded))
	}
	var extra []string
	for _, name := range slices.Sorted(maps.Keys(etcdFlags)) {
		if !embedded[name] {
			extra = append(extra, name)
		}
	}
	// The rest are etcdmain's own, which TestEtcdmainFlags checks.
	if want := []string{"config-file", "discovery-fallback", "initial-cluster-state", "v2-deprecation", "version"}; !slices.Equal(extra, want) {
		t.Errorf("flags beyond embed's: %v, want etcdmain's %v", extra, want)
	}
}

// TestEtcdmainFlags runs etcd's command line parser on etcdmain's own
// flags and the ones it ignores, with --version, which makes it print its
// version and exit before it starts anything: an unknown flag would make
// it exit 2 ("flag provided but not defined") instead.
func TestEtcdmainFlags(t *testing.T) {
	values := map[string]string{ // a value etcdmain accepts for each
		"config-file":           "",
		"discovery-fallback":    "exit",
		"initial-cluster-state": "new",
		"v2-deprecation":        "write-only",
		"version":               "true",
	}
	var args []string
	for name := range etcdFlags {
		if v, ok := values[name]; ok {
			args = append(args, "--"+name+"="+v)
		}
	}
	if len(args) != len(values) {
		t.Fatalf("etcdFlags lacks some of etcdmain's flags %v", slices.Sorted(maps.Keys(values)))
	}
	for name := range etcdIgnoredFlags {
		args = append(args, "--"+name)
	}
	for _, tt := range []struct {
		name     string
		args     []string
		wantCode int
		want     string
	}{
		{"etcdmain's flags and ignored flags", args, 0, "etcd Version: " + version.Version},
		{"an unknown flag", []string{"--no-such-flag", "--version"}, 2, "flag provided but not defined: -no-such-flag"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], tt.args...)
			cmd.Env = append(os.Environ(), "ETCDKEEPER_TEST_ETCDMAIN=1")
			out, err := cmd.CombinedOutput()
			if code := cmd.ProcessState.ExitCode(); code != tt.wantCode || !strings.Contains(string(out), tt.want) {
				t.Fatalf("etcd %s: exit %d (%v), want %d and %q; output:\n%s", strings.Join(tt.args, " "), code, err, tt.wantCode, tt.want, out)
			}
		})
	}
}

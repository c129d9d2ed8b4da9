package kubeadm

import (
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// renderedSpec imports testdata files and reads the rendered spec back as
// plain YAML: what an operator would get.
func renderedSpec(t *testing.T, files ...string) (map[string]any, Document, error) {
	t.Helper()
	d, err := ToSpec(loadManifests(t, files), KubeadmPKI(pkiDir))
	if err != nil {
		return nil, d, err
	}
	var out map[string]any
	if err := yaml.Unmarshal(render(t, d), &out); err != nil {
		t.Fatal(err)
	}
	return out, d, nil
}

// dig follows keys (strings for mappings, ints for lists) into v.
func dig(v any, keys ...any) any {
	for _, k := range keys {
		switch k := k.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			l, _ := v.([]any)
			if k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

// TestNeverShared: a setting that differs between hosts is never given
// to every member: it is per member, or the import fails.
func TestNeverShared(t *testing.T) {
	t.Run("--force-new-cluster left on one host is refused", func(t *testing.T) {
		_, _, err := renderedSpec(t, "force-new-cluster-on-one.yaml")
		if err == nil || !strings.Contains(err.Error(), "--force-new-cluster") || !strings.Contains(err.Error(), "cp2") {
			t.Fatalf("err = %v, want a refusal naming --force-new-cluster and cp2", err)
		}
	})
	t.Run("--listen-metrics-urls on each host's own address is per member", func(t *testing.T) {
		s, _, err := renderedSpec(t, "metrics-own-ip.yaml")
		if err != nil {
			t.Fatal(err)
		}
		if v := dig(s, "etcd", "flags", "listen-metrics-urls"); v != nil {
			t.Errorf("etcd.flags.listen-metrics-urls = %v: one host's address for every member", v)
		}
		for i, ip := range []string{"10.0.0.11", "10.0.0.12", "10.0.0.13"} {
			want := "http://127.0.0.1:2381,http://" + ip + ":2381"
			if v := dig(s, "members", i, "flags", "listen-metrics-urls"); v != want {
				t.Errorf("members[%d].flags.listen-metrics-urls = %v, want %s", i, v, want)
			}
		}
	})
	t.Run("a data dir that differs on one host is per member", func(t *testing.T) {
		s, d, err := renderedSpec(t, "data-dir-differs.yaml")
		if err != nil {
			t.Fatal(err)
		}
		if v := dig(s, "etcd", "dataDir"); v != "/var/lib/etcd" {
			t.Errorf("etcd.dataDir = %v, want /var/lib/etcd", v)
		}
		for i, want := range []any{nil, nil, "/mnt/etcd-disk"} {
			if v := dig(s, "members", i, "dataDir"); v != want {
				t.Errorf("members[%d].dataDir = %v, want %v", i, v, want)
			}
		}
		if anyContains(d.Warnings, "--data-dir differs") {
			t.Errorf("warnings claim one data dir: %q", d.Warnings)
		}
	})
}

// TestMemberNamedByID: kubeadm names a member that had not started yet by
// its hex member ID in --initial-cluster; import matches it to its host by
// peer URL instead of adding a member that does not exist.
func TestMemberNamedByID(t *testing.T) {
	for _, files := range [][]string{
		{"cp1.yaml", "cp2.yaml", "cp3-unstarted-peer.yaml"},
		{"cp2.yaml", "cp3-unstarted-peer.yaml"},
	} {
		d, err := ToSpec(loadManifests(t, files), KubeadmPKI(pkiDir))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, m := range d.Members {
			got = append(got, m.Name+"="+strings.Join(m.PeerURLs, ","))
		}
		want := "cp1=https://10.0.0.11:2380 cp2=https://10.0.0.12:2380 cp3=https://10.0.0.13:2380"
		if strings.Join(got, " ") != want {
			t.Errorf("%v: members %s, want %s", files, strings.Join(got, " "), want)
		}
	}
	// Alone, the entry matches no host: its name is unknown.
	if _, err := ToSpec(loadManifests(t, []string{"cp3-unstarted-peer.yaml"}), KubeadmPKI(pkiDir)); err == nil ||
		!strings.Contains(err.Error(), "8e9e05c52164694d") || !strings.Contains(err.Error(), "https://10.0.0.12:2380") {
		t.Errorf("err = %v, want the ID and peer URL named", err)
	}
}

// TestEtcdVersionChecked: the manifests' etcd image says which etcd runs
// now; etcd moves one minor version at a time, so a 3.5 cluster is told
// what must happen first.
func TestEtcdVersionChecked(t *testing.T) {
	d, err := ToSpec(loadManifests(t, []string{"cp1.yaml", "cp2.yaml", "cp3.yaml"}), KubeadmPKI(pkiDir))
	if err != nil {
		t.Fatal(err)
	}
	if !anyContains(d.Warnings, "cp1, cp2, cp3 run etcd 3.5 (registry.k8s.io/etcd:3.5.16-0): etcdkeeper runs etcd v3.7, and etcd moves one minor version at a time: upgrade the cluster to etcd 3.6 first") {
		t.Errorf("Warnings = %q", d.Warnings)
	}
	d, err = ToSpec(loadManifests(t, []string{"cp1-etcd36-extraargs.yaml"}), KubeadmPKI(pkiDir))
	if err != nil {
		t.Fatal(err)
	}
	if anyContains(d.Warnings, "run etcd 3.") {
		t.Errorf("a 3.6 cluster warned: %q", d.Warnings)
	}
}

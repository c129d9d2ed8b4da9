package kubeadm

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// host is the manifest kubeadm writes for member name at ip, with extra
// flags after kubeadm's (etcd takes the last of a repeated flag).
func host(name, ip string, extra ...string) Manifest {
	peer := "https://" + ip + ":2380"
	client := "https://" + ip + ":2379"
	if strings.Contains(ip, ":") {
		peer, client = "https://["+ip+"]:2380", "https://["+ip+"]:2379"
	}
	args := []string{"etcd",
		"--advertise-client-urls=" + client,
		"--cert-file=/etc/kubernetes/pki/etcd/server.crt",
		"--client-cert-auth=true",
		"--data-dir=/var/lib/etcd",
		"--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=" + name + "=" + peer,
		"--key-file=/etc/kubernetes/pki/etcd/server.key",
		"--listen-client-urls=https://127.0.0.1:2379," + client,
		"--listen-peer-urls=" + peer,
		"--name=" + name,
		"--trusted-ca-file=/etc/kubernetes/pki/etcd/ca.crt",
	}
	flags, err := parseArgs(append(args, extra...))
	if err != nil {
		panic(err)
	}
	return Manifest{Source: name + ".yaml", Flags: flags, Mounts: []Mount{
		{"/var/lib/etcd", "/var/lib/etcd"},
		{"/etc/kubernetes/pki/etcd", "/etc/kubernetes/pki/etcd"},
	}}
}

func flagOf(d Document, name string) (string, bool) {
	for _, f := range d.Flags {
		if f.Name == name {
			return f.Value, true
		}
	}
	return "", false
}

func anyContains(list []string, sub string) bool {
	return slices.ContainsFunc(list, func(s string) bool { return strings.Contains(s, sub) })
}

func TestToSpec(t *testing.T) {
	tests := []struct {
		name  string
		ms    []Manifest
		check func(t *testing.T, d Document)
	}{
		{
			name: "a gate the manifest turns off is written with etcdkeeper's default gates",
			ms:   []Manifest{host("cp1", "10.0.0.11", "--experimental-initial-corrupt-check=false")},
			check: func(t *testing.T, d Document) {
				if v, _ := flagOf(d, "feature-gates"); v != "CompactHashCheck=true,InitialCorruptCheck=false,StopGRPCServiceOnDefrag=true" {
					t.Errorf("feature-gates = %q", v)
				}
				if !anyContains(d.Dropped, "--experimental-initial-corrupt-check=false: every --experimental-* flag is gone") {
					t.Errorf("Dropped = %q", d.Dropped)
				}
			},
		},
		{
			name: "feature-gates with another gate keeps etcdkeeper's",
			ms:   []Manifest{host("cp1", "10.0.0.11", "--feature-gates=LeaseCheckpoint=true")},
			check: func(t *testing.T, d Document) {
				if v, _ := flagOf(d, "feature-gates"); v != "CompactHashCheck=true,InitialCorruptCheck=true,LeaseCheckpoint=true,StopGRPCServiceOnDefrag=true" {
					t.Errorf("feature-gates = %q", v)
				}
			},
		},
		{
			name: "a renamed flag is kept under its new name, unless the new one is set too; others are dropped",
			ms: []Manifest{host("cp1", "10.0.0.11",
				"--experimental-compaction-batch-limit=100", "--compaction-batch-limit=200",
				"--experimental-corrupt-check-time=5m", "--experimental-enable-v2v3=/v2")},
			check: func(t *testing.T, d Document) {
				if v, _ := flagOf(d, "compaction-batch-limit"); v != "200" {
					t.Errorf("compaction-batch-limit = %q, want the manifest's own 200", v)
				}
				if v, _ := flagOf(d, "corrupt-check-time"); v != "5m" {
					t.Errorf("corrupt-check-time = %q, want 5m", v)
				}
				if _, ok := flagOf(d, "experimental-compaction-batch-limit"); ok {
					t.Error("an --experimental-* flag went to etcd.flags")
				}
				if !anyContains(d.Dropped, "--experimental-compaction-batch-limit=100: every --experimental-* flag is gone in etcd v3.7; the manifest also sets its replacement") {
					t.Errorf("Dropped = %q", d.Dropped)
				}
				if !anyContains(d.Dropped, "--experimental-enable-v2v3=/v2: every --experimental-* flag is gone in etcd v3.7, and this one has no known replacement") {
					t.Errorf("Dropped = %q", d.Dropped)
				}
			},
		},
		{
			name: "wal-dir and config-file cannot be carried over",
			ms:   []Manifest{host("cp1", "10.0.0.11", "--wal-dir=/wal", "--config-file=/etc/etcd.conf")},
			check: func(t *testing.T, d Document) {
				if len(d.Flags) != 0 {
					t.Errorf("Flags = %v, want none", d.Flags)
				}
				if !anyContains(d.Warnings, "--wal-dir=/wal") || !anyContains(d.Warnings, "--config-file=/etc/etcd.conf") {
					t.Errorf("Warnings = %q", d.Warnings)
				}
			},
		},
		{
			name: "hosts that disagree on a flag: each member's own value, none in etcd.flags",
			ms: []Manifest{
				host("cp2", "10.0.0.12", "--snapshot-count=5000"),
				host("cp1", "10.0.0.11", "--snapshot-count=10000", "--quota-backend-bytes=1"),
			},
			check: func(t *testing.T, d Document) {
				if v, ok := flagOf(d, "snapshot-count"); ok {
					t.Errorf("etcd.flags snapshot-count = %q, want none", v)
				}
				if !reflect.DeepEqual(d.Members[0].Flags, []NotedFlag{{Flag{"quota-backend-bytes", "1"}, "--quota-backend-bytes differs between hosts: this member's own."},
					{Flag{"snapshot-count", "10000"}, "--snapshot-count differs between hosts: this member's own."}}) {
					t.Errorf("cp1 flags = %v", d.Members[0].Flags)
				}
				if !reflect.DeepEqual(d.Members[1].Flags, []NotedFlag{{Flag{"snapshot-count", "5000"}, "--snapshot-count differs between hosts: this member's own."}}) {
					t.Errorf("cp2 flags = %v", d.Members[1].Flags)
				}
				if !anyContains(d.Warnings, "--quota-backend-bytes differs between hosts: it is in the flags of member cp1 only; cp2 have none") {
					t.Errorf("Warnings = %q", d.Warnings)
				}
			},
		},
		{
			name: "kubeadm's listen URLs are kept as they are, 127.0.0.1 on every host",
			ms:   []Manifest{host("cp1", "10.0.0.11"), host("cp2", "10.0.0.12")},
			check: func(t *testing.T, d Document) {
				for i, ip := range []string{"10.0.0.11", "10.0.0.12"} {
					m := d.Members[i]
					if want := []string{"https://127.0.0.1:2379", "https://" + ip + ":2379"}; !reflect.DeepEqual(m.ListenClientURLs, want) {
						t.Errorf("%s listenClientURLs = %v, want %v", m.Name, m.ListenClientURLs, want)
					}
					if want := []string{"https://" + ip + ":2380"}; !reflect.DeepEqual(m.ListenPeerURLs, want) {
						t.Errorf("%s listenPeerURLs = %v, want %v", m.Name, m.ListenPeerURLs, want)
					}
				}
				if anyContains(d.Warnings, "listenClientURLs") || anyContains(d.Warnings, "0.0.0.0") {
					t.Errorf("Warnings = %q", d.Warnings)
				}
			},
		},
		{
			name: "IPv6: kubeadm's [::1] is kept",
			ms:   []Manifest{host("cp1", "fd00::11", "--listen-client-urls=https://[::1]:2379,https://[fd00::11]:2379")},
			check: func(t *testing.T, d Document) {
				if got := d.Members[0].ListenClientURLs; !reflect.DeepEqual(got, []string{"https://[::1]:2379", "https://[fd00::11]:2379"}) {
					t.Errorf("listenClientURLs = %v", got)
				}
			},
		},
		{
			name: "listen URLs without loopback are kept as they are",
			ms:   []Manifest{host("cp1", "10.0.0.11", "--listen-client-urls=https://10.0.0.11:2379")},
			check: func(t *testing.T, d Document) {
				if got := d.Members[0].ListenClientURLs; !reflect.DeepEqual(got, []string{"https://10.0.0.11:2379"}) {
					t.Errorf("listenClientURLs = %v", got)
				}
				if anyContains(d.Warnings, "listenClientURLs") {
					t.Errorf("Warnings = %q", d.Warnings)
				}
			},
		},
		{
			name: "no --advertise-client-urls: derived from the peer URL",
			ms:   []Manifest{host("cp1", "10.0.0.11", "--advertise-client-urls=")},
			check: func(t *testing.T, d Document) {
				if got := d.Members[0].ClientURLs; !reflect.DeepEqual(got, []string{"https://10.0.0.11:2379"}) {
					t.Errorf("clientURLs = %v", got)
				}
				if !strings.Contains(d.Members[0].Note, "no --advertise-client-urls") {
					t.Errorf("Note = %q", d.Members[0].Note)
				}
			},
		},
		{
			name: "a member's own peer URL wins over older --initial-cluster copies",
			ms: []Manifest{
				host("cp1", "10.0.0.21"),
				host("cp2", "10.0.0.12", "--initial-cluster=cp1=https://10.0.0.11:2380,cp2=https://10.0.0.12:2380"),
			},
			check: func(t *testing.T, d Document) {
				if got := d.Members[0].PeerURLs; !reflect.DeepEqual(got, []string{"https://10.0.0.21:2380"}) {
					t.Errorf("cp1 peerURLs = %v", got)
				}
				if !strings.Contains(d.Members[0].Note, "cp2's manifest cp2.yaml lists it with https://10.0.0.11:2380") {
					t.Errorf("Note = %q", d.Members[0].Note)
				}
			},
		},
		{
			name: "members named only by others are derived the kubeadm way, with a warning",
			ms: []Manifest{host("cp3", "10.0.0.13",
				"--initial-cluster=cp1=https://10.0.0.11:2380,cp2=https://[fd00::12]:2380,cp3=https://10.0.0.13:2380")},
			check: func(t *testing.T, d Document) {
				want := []Member{
					{Name: "cp1", PeerURLs: []string{"https://10.0.0.11:2380"}, ClientURLs: []string{"https://10.0.0.11:2379"},
						ListenClientURLs: []string{"https://127.0.0.1:2379", "https://10.0.0.11:2379"}},
					{Name: "cp2", PeerURLs: []string{"https://[fd00::12]:2380"}, ClientURLs: []string{"https://[fd00::12]:2379"},
						ListenClientURLs: []string{"https://[::1]:2379", "https://[fd00::12]:2379"}},
				}
				for i, w := range want {
					got := d.Members[i]
					got.Note = ""
					if !reflect.DeepEqual(got, w) {
						t.Errorf("%s = %+v, want %+v", w.Name, got, w)
					}
				}
				if !anyContains(d.Warnings, "no manifest of cp1, cp2") {
					t.Errorf("Warnings = %q", d.Warnings)
				}
			},
		},
		{
			name: "a derived member whose peer host is a name listens where the spec derives",
			ms:   []Manifest{host("cp2", "10.0.0.12", "--initial-cluster=cp1=https://cp1.example:2380,cp2=https://10.0.0.12:2380")},
			check: func(t *testing.T, d Document) {
				want := Member{Name: "cp1", PeerURLs: []string{"https://cp1.example:2380"}, ClientURLs: []string{"https://cp1.example:2379"}}
				got := d.Members[0]
				note := got.Note
				got.Note = ""
				if !reflect.DeepEqual(got, want) {
					t.Errorf("cp1 = %+v, want %+v", got, want)
				}
				if !strings.Contains(note, "not an IP") {
					t.Errorf("Note = %q", note)
				}
			},
		},
		{
			name: "--initial-cluster-token names the cluster",
			ms:   []Manifest{host("cp1", "10.0.0.11", "--initial-cluster-token=prod")},
			check: func(t *testing.T, d Document) {
				if d.ClusterName != "prod" {
					t.Errorf("cluster name %q", d.ClusterName)
				}
			},
		},
		{
			name: "client-cert-auth off is carried over",
			ms:   []Manifest{host("cp1", "10.0.0.11", "--client-cert-auth=false")},
			check: func(t *testing.T, d Document) {
				if d.TLS.Client.ClientCertAuth {
					t.Error("clientCertAuth is on")
				}
			},
		},
		{
			name: "kubeadm's data dir is kept as it is, backups inside it, no warning",
			ms:   []Manifest{host("cp1", "10.0.0.11"), host("cp2", "10.0.0.12")},
			check: func(t *testing.T, d Document) {
				if d.DataDir != "/var/lib/etcd" {
					t.Errorf("DataDir = %q, want kubeadm's /var/lib/etcd", d.DataDir)
				}
				if strings.Contains(d.DataDirNote, "mv ") || !strings.Contains(d.DataDirNote, "/var/lib/etcd/.etcdkeeper-backups") {
					t.Errorf("DataDirNote = %q", d.DataDirNote)
				}
				if anyContains(d.Warnings, "backup") || anyContains(d.Warnings, "ReadWritePaths") {
					t.Errorf("Warnings = %q", d.Warnings)
				}
			},
		},
		{
			name: "a data dir on another disk: the warning names the drop-in's ReadWritePaths",
			ms: func() []Manifest {
				m := host("cp1", "10.0.0.11")
				m.Mounts[0] = Mount{"/var/lib/etcd", "/mnt/etcd-disk"}
				return []Manifest{m}
			}(),
			check: func(t *testing.T, d Document) {
				if d.DataDir != "/mnt/etcd-disk" {
					t.Errorf("DataDir = %q, want the host path /mnt/etcd-disk", d.DataDir)
				}
				if !strings.Contains(d.DataDirNote, "/mnt/etcd-disk/.etcdkeeper-backups") {
					t.Errorf("DataDirNote = %q", d.DataDirNote)
				}
				if !anyContains(d.Warnings, "ReadWritePaths=/mnt/etcd-disk") || anyContains(d.Warnings, "backup") {
					t.Errorf("Warnings = %q", d.Warnings)
				}
			},
		},
		{
			name: "a file on no hostPath volume",
			ms:   []Manifest{host("cp1", "10.0.0.11", "--trusted-ca-file=/opt/ca.crt")},
			check: func(t *testing.T, d Document) {
				if !anyContains(d.Warnings, "--trusted-ca-file=/opt/ca.crt in cp1's manifest cp1.yaml is on no hostPath volume") {
					t.Errorf("Warnings = %q", d.Warnings)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := ToSpec(tc.ms, KubeadmPKI(pkiDir))
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, d)
		})
	}
}

func TestToSpecErrors(t *testing.T) {
	tests := []struct {
		name    string
		ms      []Manifest
		wantErr string
	}{
		{"no manifest", nil, "no manifest"},
		{"one host twice", []Manifest{host("cp1", "10.0.0.11"), host("cp1", "10.0.0.11")}, "member cp1: two manifests"},
		{"a broken --initial-cluster", []Manifest{host("cp1", "10.0.0.11", "--initial-cluster=cp1")}, `--initial-cluster: "cp1" is not name=peerURL`},
		{"no --data-dir", []Manifest{host("cp1", "10.0.0.11", "--data-dir=")}, "cp1's manifest cp1.yaml: no --data-dir"},
		{"no peer URL at all", []Manifest{host("cp1", "10.0.0.11", "--initial-advertise-peer-urls=", "--initial-cluster=")}, "import needs the member's peer URLs"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ToSpec(tc.ms, KubeadmPKI(pkiDir))
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
			}
		})
	}
}

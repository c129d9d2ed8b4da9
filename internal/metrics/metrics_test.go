package metrics

import (
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/certs"
	"github.com/etcdkeeper/etcdkeeper/internal/testpki"
)

// TestCertificateExpiry: each readable certificate file has its expiry,
// read at the scrape: a renewed file shows its new expiry at once.
func TestCertificateExpiry(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, "etcd-ca")
	testpki.WriteFile(t, filepath.Join(dir, "ca.crt"), ca.CertPEM)
	expired := time.Now().Add(-time.Hour).Truncate(time.Second)
	ca.IssueValid(t, "cp1", expired.Add(-time.Hour), expired, net.IPv4(10, 0, 0, 11)).Write(t, dir, "peer")
	m := New()
	files := []certs.File{
		{Kind: "peer", Path: filepath.Join(dir, "peer.crt")},
		{Kind: "ca", Path: filepath.Join(dir, "ca.crt")},
		{Kind: "client", Path: filepath.Join(dir, "missing.crt")},
	}
	m.SetCertificates("cp1", files)
	got := expiries(t, m)
	if len(got) != 2 || got["peer "+files[0].Path] != float64(expired.Unix()) || got["ca "+files[1].Path] < float64(time.Now().Add(9*365*24*time.Hour).Unix()) {
		t.Fatalf("expiries = %v, want the peer certificate's %d and the CA's, none for the missing file", got, expired.Unix())
	}
	renewed := time.Now().Add(365 * 24 * time.Hour).Truncate(time.Second)
	ca.IssueValid(t, "cp1", time.Now(), renewed, net.IPv4(10, 0, 0, 11)).Write(t, dir, "peer")
	if got := expiries(t, m); got["peer "+files[0].Path] != float64(renewed.Unix()) {
		t.Errorf("after renewal: %v, want %d", got, renewed.Unix())
	}
}

// expiries is kind+" "+path -> value of the expiry metric, member cp1.
func expiries(t *testing.T, m *Metrics) map[string]float64 {
	t.Helper()
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "etcdkeeper_certificate_expiry_timestamp_seconds" {
			continue
		}
		for _, s := range mf.GetMetric() {
			l := map[string]string{}
			for _, p := range s.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l["member"] != "cp1" {
				t.Errorf("member label %q", l["member"])
			}
			out[l["kind"]+" "+l["path"]] = s.GetGauge().GetValue()
		}
	}
	return out
}

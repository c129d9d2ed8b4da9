package etcdproc

import (
	"slices"
	"strings"
	"testing"

	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

func TestFlagsTLS(t *testing.T) {
	tests := []struct {
		name string
		tls  spec.TLS
		want []string
	}{
		{"none", spec.TLS{}, nil},
		{"client and peer, client certificates required", spec.TLS{
			Client: spec.TLSServer{CertFile: "/pki/n1.crt", KeyFile: "/pki/n1.key", TrustedCAFile: "/pki/ca.crt", ClientCertAuth: true},
			Peer:   spec.TLSServer{CertFile: "/pki/n1-peer.crt", KeyFile: "/pki/n1-peer.key", TrustedCAFile: "/pki/ca.crt", ClientCertAuth: true},
			Agent:  spec.TLSClient{CertFile: "/pki/agent.crt", KeyFile: "/pki/agent.key"},
		}, []string{
			"--cert-file=/pki/n1.crt", "--key-file=/pki/n1.key", "--trusted-ca-file=/pki/ca.crt", "--client-cert-auth=true",
			"--peer-cert-file=/pki/n1-peer.crt", "--peer-key-file=/pki/n1-peer.key", "--peer-trusted-ca-file=/pki/ca.crt", "--peer-client-cert-auth=true",
		}},
		{"server certificate only, peer plain", spec.TLS{
			Client: spec.TLSServer{CertFile: "/pki/n1.crt", KeyFile: "/pki/n1.key"},
		}, []string{"--cert-file=/pki/n1.crt", "--key-file=/pki/n1.key"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &spec.Spec{Cluster: spec.Cluster{Name: "c"}}
			m := spec.Member{Name: "n1", TLS: tt.tls}
			var got []string
			for _, f := range Flags(s, m, Bootstrap{}) {
				if strings.Contains(f, "cert") || strings.Contains(f, "-key-") || strings.HasPrefix(f, "--key") || strings.Contains(f, "trusted-ca") {
					got = append(got, f)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("TLS flags\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

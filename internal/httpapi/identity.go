package httpapi

import (
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

// onlyMembers serves h to callers whose verified client certificate names
// a member of the spec (memberNamed); anyone else gets 403.
func onlyMembers(h http.Handler, members func() []spec.Member) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.TLS == nil || len(req.TLS.VerifiedChains) == 0 || len(req.TLS.VerifiedChains[0]) == 0 {
			writeJSON(w, http.StatusForbidden, map[string]string{"error": "agent.recoveryAddr takes callers with a verified peer certificate only"})
			return
		}
		cert := req.TLS.VerifiedChains[0][0]
		if _, ok := memberNamed(cert, members()); !ok {
			writeJSON(w, http.StatusForbidden, map[string]string{"error": fmt.Sprintf(
				"the certificate %q (DNS %v, IP %v) names no member of the spec: agent.recoveryAddr takes the members' peer certificates only",
				cert.Subject.CommonName, cert.DNSNames, cert.IPAddresses)})
			return
		}
		h.ServeHTTP(w, req)
	})
}

// memberNamed is the member a certificate names: its common name or one
// of its DNS names is the member's name or the host of one of its peer
// URLs, or one of its IP addresses is a peer URL's IP. A certificate the
// peer CA signed for anything else (a client of the API server, a health
// check) names none.
func memberNamed(cert *x509.Certificate, members []spec.Member) (string, bool) {
	names := append([]string{cert.Subject.CommonName}, cert.DNSNames...)
	for _, m := range members {
		hosts := []string{m.Name}
		for _, u := range m.PeerURLs {
			if pu, err := url.Parse(u); err == nil && pu.Hostname() != "" {
				hosts = append(hosts, pu.Hostname())
			}
		}
		for _, h := range hosts {
			if ip := net.ParseIP(h); ip != nil {
				for _, cip := range cert.IPAddresses {
					if cip.Equal(ip) {
						return m.Name, true
					}
				}
				continue
			}
			for _, n := range names {
				if n != "" && strings.EqualFold(n, h) {
					return m.Name, true
				}
			}
		}
	}
	return "", false
}

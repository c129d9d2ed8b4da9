package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"time"
)

// HandshakeError: the TLS handshake with an etcd endpoint failed: etcd
// refused the agent's certificate (or its absence), or the agent etcd's.
type HandshakeError struct {
	Endpoint string
	// Reason says who refused whom, with TLS's words.
	Reason string
	Err    error
}

func (e *HandshakeError) Error() string {
	return fmt.Sprintf("TLS handshake with %s failed: %s", e.Endpoint, e.Reason)
}

func (e *HandshakeError) Unwrap() error { return e.Err }

// HandshakeRefused is the reason of a TLS handshake that failed, from an
// etcd call's error; "" when the call failed otherwise.
func HandshakeRefused(err error) string {
	var he *HandshakeError
	if errors.As(err, &he) {
		return he.Reason
	}
	return ""
}

// probeTimeout bounds a handshake probe, and probeAlertWait how long it
// waits for etcd's verdict on the agent's certificate after the
// handshake.
const (
	probeTimeout   = time.Second
	probeAlertWait = 300 * time.Millisecond
)

// probeHandshake shakes hands with endpoint the way the agent's calls do
// and returns the TLS failure, nil when there is none (or the endpoint is
// not reached at all). gRPC's retries end in a deadline that hides why
// the connection failed: this says it.
func probeHandshake(ctx context.Context, endpoint string, cfg *tls.Config) *HandshakeError {
	u, err := url.Parse(endpoint)
	if err != nil || u.Scheme != "https" {
		return nil
	}
	cfg = cfg.Clone()
	cfg.ServerName = u.Hostname()
	cfg.NextProtos = []string{"h2"}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	d := tls.Dialer{Config: cfg}
	conn, err := d.DialContext(ctx, "tcp", u.Host)
	if err != nil {
		return tlsFailure(endpoint, err)
	}
	defer conn.Close()
	// In TLS 1.3 the server checks the client's certificate after the
	// client has finished its handshake: its refusal is an alert, read
	// next. A server that accepted waits for the client to speak.
	_ = conn.SetReadDeadline(time.Now().Add(probeAlertWait))
	_, err = conn.Read(make([]byte, 1))
	return tlsFailure(endpoint, err)
}

// tlsFailure is err when it is a failure of TLS itself (an alert from
// the other side, a certificate that does not verify, no TLS spoken),
// nil for anything else (a timeout, a refused or reset connection).
func tlsFailure(endpoint string, err error) *HandshakeError {
	var (
		op     *net.OpError
		verify *tls.CertificateVerificationError
		record tls.RecordHeaderError
	)
	why := ""
	switch {
	case errors.As(err, &op) && op.Op == "remote error":
		// crypto/tls reports the other side's alert so ("remote error:
		// tls: certificate required"); etcd logs its side as "rejected
		// connection".
		why = "etcd refused the agent's certificate (tls.agent): " + err.Error()
	case errors.As(err, &verify):
		why = "the agent refused etcd's certificate (tls.client.certFile, checked against tls.agent.trustedCAFile): " + verify.Error()
	case errors.As(err, &record):
		why = "etcd does not speak TLS there: " + record.Error()
	default:
		return nil
	}
	return &HandshakeError{Endpoint: endpoint, Reason: why, Err: err}
}

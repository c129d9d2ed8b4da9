package agent

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

// TestLocalStatusNotListening: while etcd settles, a client port that
// refuses connections is reported as such, without a status call (whose
// refused first connection would cost gRPC's reconnect backoff later).
func TestLocalStatusNotListening(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "http://" + l.Addr().String()
	l.Close() // the port now refuses connections
	s, err := spec.Parse([]byte(`cluster: {name: c}
members:
  - {name: a, peerURLs: [http://127.0.0.1:2380], clientURLs: [`+endpoint+`]}
`), "spec.yaml")
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(Config{Spec: s, Name: "a"})
	if err != nil {
		t.Fatal(err)
	}
	a.settling = true
	if _, err := a.localStatus(context.Background(), endpoint); !errors.Is(err, errNotListening) {
		t.Errorf("localStatus = %v, want %v", err, errNotListening)
	}
}

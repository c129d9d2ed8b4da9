package agent

import (
	"context"
	"errors"
	"net"
	"strconv"
	"testing"

	"github.com/etcdkeeper/etcdkeeper/internal/spec"
	"github.com/etcdkeeper/etcdkeeper/internal/testport"
)

// TestLocalStatusNotListening: while etcd settles, a client port that
// refuses connections is reported as such, without a status call (whose
// refused first connection would cost gRPC's reconnect backoff later).
func TestLocalStatusNotListening(t *testing.T) {
	// A port no other test (of this process or another) is given: it
	// refuses connections.
	port, err := testport.Free("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
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

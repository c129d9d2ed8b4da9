package kubeadm

import (
	"fmt"
	"testing"
	"time"
)

// TestImportLinear: 200k flags (hostile or generated) import in linear
// time; a quadratic import took minutes.
func TestImportLinear(t *testing.T) {
	m := host("cp1", "10.0.0.11")
	for i := range 200_000 {
		m.Flags = append(m.Flags, Flag{Name: fmt.Sprintf("x-flag-%d", i), Value: "1"})
	}
	done := make(chan error, 1)
	go func() {
		_, err := ToSpec([]Manifest{m}, KubeadmPKI(pkiDir))
		done <- err
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("ToSpec with 200k flags did not finish in 20 s: not linear")
	}
}

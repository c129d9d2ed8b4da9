package agent

import "testing"

func TestAlarmed(t *testing.T) {
	errs := []string{"memberID:12 alarm:NOSPACE ", "memberID:123 alarm:CORRUPT "}
	tests := []struct {
		id   uint64
		kind string
		want bool
	}{
		{123, "CORRUPT", true},
		{12, "CORRUPT", false}, // another member's alarm, and 12 is a prefix of 123
		{12, "NOSPACE", true},
		{1, "CORRUPT", false},
	}
	for _, tt := range tests {
		if got := alarmed(errs, tt.id, tt.kind); got != tt.want {
			t.Errorf("alarmed(%d, %s) = %v, want %v", tt.id, tt.kind, got, tt.want)
		}
	}
}

func TestBackoff(t *testing.T) {
	b := backoff{base: 1e9, max: 30e9}
	if d := b.next(); d != 0 {
		t.Fatalf("first restart delayed by %s; one crash is no loop", d)
	}
	prev := b.next()
	for i := 0; i < 10; i++ {
		d := b.next()
		if d > 33e9 || d < 0 {
			t.Fatalf("delay %s out of bounds", d)
		}
		if i < 3 && d <= prev {
			t.Fatalf("delay did not grow: %s after %s", d, prev)
		}
		prev = d
	}
	b.reset()
	if d := b.next(); d != 0 {
		t.Fatalf("after reset the first restart is delayed by %s", d)
	}
}

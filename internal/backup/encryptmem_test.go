package backup

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"testing"
	"time"

	"filippo.io/age"
)

// TestEncryptMem: the encryption that follows a snapshot's plaintext into
// memory gives, whatever the pace of the writes, a ciphertext that
// decrypts to exactly what was written, and the sum and size of what it
// wrote; it ends with the writer's error, or when it is stopped, without
// waiting for the writing to end.
func TestEncryptMem(t *testing.T) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	plain := make([]byte, 3*chunk+12345)
	if _, err := rand.Read(plain); err != nil {
		t.Fatal(err)
	}
	writeErr := errors.New("the stream broke")
	cases := []struct {
		name string
		// pieces: the sizes written, in order (the rest in one piece).
		pieces []int
		// pause between writes, letting the follower catch up and wait.
		pause time.Duration
		// end: nil, the writer's error, or stop instead of an end.
		end  error
		stop bool
		want error
		// mapped: what encryptMem maps of the memfd (the rest by pread).
		mapped int64
	}{
		{name: "written at once", pieces: nil},
		{name: "written at once, mapped", pieces: nil, mapped: 64 << 20},
		{name: "etcd's pieces, mapped in part", pieces: []int{32 << 10, 32 << 10, 1, 100 << 10, chunk, chunk + 7}, pause: 5 * time.Millisecond, mapped: 2*chunk + 4096},
		{name: "etcd's pieces, the follower waiting", pieces: []int{32 << 10, 32 << 10, 1, 100 << 10, chunk, chunk + 7}, pause: 5 * time.Millisecond},
		{name: "one byte, then the rest", pieces: []int{1}, pause: 20 * time.Millisecond},
		{name: "empty", pieces: []int{0}},
		{name: "the writer fails", pieces: []int{chunk}, end: writeErr, want: writeErr},
		{name: "stopped before the end", pieces: []int{chunk}, stop: true, want: errStopped},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mem, _, err := memFile("test")
			if err != nil {
				t.Fatal(err)
			}
			defer mem.Close()
			tail := newMemTail(mem)
			stop := make(chan struct{})
			var out bytes.Buffer
			got := make(chan encryptedFile, 1)
			go func() { got <- encryptMem(tail, c.mapped, &out, []age.Recipient{id.Recipient()}, stop) }()
			data := plain
			if c.name == "empty" {
				data = nil
			}
			rest := data
			for _, n := range c.pieces {
				n = min(n, len(rest))
				if _, err := tail.Write(rest[:n]); err != nil {
					t.Fatal(err)
				}
				rest = rest[n:]
				time.Sleep(c.pause)
			}
			switch {
			case c.stop:
				close(stop) // the writing never ends
			case c.end != nil:
				tail.end(c.end)
			default:
				if _, err := tail.Write(rest); err != nil {
					t.Fatal(err)
				}
				tail.end(nil)
			}
			var e encryptedFile
			select {
			case e = <-got:
			case <-time.After(30 * time.Second):
				t.Fatal("the encryption did not end")
			}
			if c.want != nil {
				if !errors.Is(e.err, c.want) {
					t.Fatalf("err = %v, want %v", e.err, c.want)
				}
				return
			}
			if e.err != nil {
				t.Fatal(e.err)
			}
			sum := sha256.Sum256(out.Bytes())
			if e.sum != hex.EncodeToString(sum[:]) || e.size != int64(out.Len()) {
				t.Fatalf("sum %s size %d, the ciphertext's are %x and %d", e.sum, e.size, sum, out.Len())
			}
			r, err := age.Decrypt(bytes.NewReader(out.Bytes()), id)
			if err != nil {
				t.Fatal(err)
			}
			back, err := io.ReadAll(r)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(back, data) {
				t.Fatalf("decrypted %d bytes, %d written, or not the same bytes", len(back), len(data))
			}
		})
	}
}

package backup

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"testing"
)

// TestStreamSums: one pass gives the whole stream's sha256 and checks
// etcd's appended db sum, however the stream is cut into writes, as two
// separate hashes would.
func TestStreamSums(t *testing.T) {
	db := make([]byte, 4*512)
	_, _ = rand.Read(db)
	dbSum := sha256.Sum256(db)
	withTrailer := append(append([]byte(nil), db...), dbSum[:]...)
	badTrailer := append([]byte(nil), withTrailer...)
	badTrailer[len(badTrailer)-1] ^= 1
	for _, tt := range []struct {
		name      string
		data      []byte
		integrity string
		err       error
	}{
		{"etcd's stream", withTrailer, "ok", nil},
		{"its appended sum altered", badTrailer, "", errIntegrity},
		{"a copied db (no trailer)", db, "none", nil},
		{"shorter than a trailer", db[:10], "none", nil},
		{"a trailer alone (empty db)", func() []byte { s := sha256.Sum256(nil); return s[:] }(), "ok", nil},
		{"empty", nil, "none", nil},
	} {
		whole := sha256.Sum256(tt.data)
		for _, piece := range []int{1, 7, 31, 32, 33, 500, 4096, len(tt.data) + 1} {
			s := newStreamSums()
			for b := tt.data; len(b) > 0; {
				k := min(piece, len(b))
				_, _ = s.Write(b[:k])
				b = b[k:]
			}
			got, err := s.result()
			if !errors.Is(err, tt.err) || got.Integrity != tt.integrity || got.Size != int64(len(tt.data)) || got.SHA256 != hex.EncodeToString(whole[:]) {
				t.Errorf("%s in writes of %d: %+v, %v; want sha256 %x, %d bytes, integrity %q, %v", tt.name, piece, got, err, whole, len(tt.data), tt.integrity, tt.err)
			}
		}
	}
}

package backup

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"hash"
)

// streamSums hashes a snapshot as it passes, in one sha256 pass: the
// whole stream's sum (the sidecar's) and, when the stream ends as etcd's
// does (a db of 512-byte pages followed by its sha256), the db's sum,
// which must be that trailer. The last 32 bytes are held back until the
// end; the db's sum is taken before they are added (sha256's Sum does not
// end the hash), so the db is hashed once, not once for each sum.
type streamSums struct {
	h    hash.Hash
	tail [sha256.Size]byte
	nt   int // bytes held in tail
	n    int64
}

func newStreamSums() *streamSums { return &streamSums{h: sha256.New()} }

func (s *streamSums) Write(p []byte) (int, error) {
	s.n += int64(len(p))
	if len(p) >= len(s.tail) {
		s.h.Write(s.tail[:s.nt])
		s.h.Write(p[:len(p)-len(s.tail)])
		s.nt = copy(s.tail[:], p[len(p)-len(s.tail):])
		return len(p), nil
	}
	if over := s.nt + len(p) - len(s.tail); over > 0 {
		s.h.Write(s.tail[:over])
		s.nt = copy(s.tail[:], s.tail[over:s.nt])
	}
	s.nt += copy(s.tail[s.nt:], p)
	return len(p), nil
}

// summed is what streamSums found of a whole snapshot: its sha256 and
// size, and Integrity as Verification says it ("ok": etcd's appended
// sha256 matches the db; "none": there is none).
type summed struct {
	SHA256    string
	Size      int64
	Integrity string
}

// errIntegrity: the sha256 etcd appended to the stream is not the db's.
var errIntegrity = errors.New("snapshot integrity: the sha256 etcd appended does not match the db: the file is damaged")

// result ends the pass. It returns errIntegrity (with the sums) when the
// stream has etcd's trailer and the db does not match it.
func (s *streamSums) result() (summed, error) {
	hasTrailer := s.n >= sha256.Size && s.n%512 == sha256.Size
	var db []byte
	if hasTrailer {
		db = s.h.Sum(nil)
	}
	s.h.Write(s.tail[:s.nt])
	out := summed{SHA256: hexSum(s.h), Size: s.n, Integrity: "none"}
	if !hasTrailer {
		return out, nil
	}
	if !bytes.Equal(db, s.tail[:]) {
		out.Integrity = ""
		return out, errIntegrity
	}
	out.Integrity = "ok"
	return out, nil
}

package backup

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/atomicfile"
)

// Who wrote a snapshot (Sidecar.By).
const (
	BySchedule = "schedule"    // the agent's schedule: subject to retention
	ByHand     = "backup save" // the CLI: never deleted
	ByRollout  = "rollout"     // before a rollout's first restart: never deleted
)

// writer is the Sidecar.Writer of every sidecar etcdkeeper writes.
const writer = "etcdkeeper"

// Sidecar is <snapshot>.json: what the agent knows about one snapshot.
type Sidecar struct {
	Writer  string `json:"writer"`
	By      string `json:"by"`
	Cluster string `json:"cluster"`
	// Member is the member whose agent wrote it (the host).
	Member string `json:"member"`
	File   string `json:"file"`
	// Seq orders the snapshots in a dir without trusting the clock: one
	// more than the highest Seq in the dir when it was written.
	Seq     int64     `json:"seq"`
	TakenAt time.Time `json:"takenAt"`
	Source  Source    `json:"source"`
	// SHA256 and Size are the file's as it lies on disk and in S3: the
	// ciphertext's when Encryption is set.
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
	// Encryption: the file is encrypted (age), to these recipients, from
	// this plaintext; nil: the file is the plaintext snapshot.
	Encryption *Encryption `json:"encryption,omitempty"`
	// Verified: every check of Verification passed.
	Verified     bool         `json:"verified"`
	Verification Verification `json:"verification"`
	// Seconds is how long taking and verifying took.
	Seconds      float64       `json:"seconds"`
	RestoreCheck *RestoreCheck `json:"restoreCheck,omitempty"`
	Uploaded     string        `json:"uploaded,omitempty"`
}

// Source is the member a snapshot was read from.
type Source struct {
	Name      string `json:"name"`
	ID        string `json:"id"`
	ClusterID string `json:"clusterID"`
	Endpoint  string `json:"endpoint"`
	Role      string `json:"role"`
}

// owns: the sidecar says this snapshot file was written and verified by
// the schedule of owner's agent, from owner's cluster (its ID, not only
// its name: two clusters of one name may share a dir) — the only
// snapshots retention may delete.
func (s *Sidecar) owns(file string, owner Owner) bool {
	return s != nil && s.Writer == writer && s.By == BySchedule && s.Cluster == owner.Cluster &&
		s.Member == owner.Member && s.File == file && s.Verified && s.SHA256 != "" &&
		owner.ClusterID != "" && s.Source.ClusterID == owner.ClusterID
}

func readSidecar(path string) (*Sidecar, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var s Sidecar
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("sidecar %s: %w", filepath.Base(path), err)
	}
	return &s, nil
}

func writeSidecar(path string, s *Sidecar) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("encode sidecar: %w", err)
	}
	return atomicfile.WriteFile(path, append(b, '\n'), 0o600)
}

package backup

import "time"

// RestoreCheck is the result of restoring a snapshot into a throwaway
// etcd and comparing what it serves with the snapshot's verification.
type RestoreCheck struct {
	At      time.Time `json:"at"`
	OK      bool      `json:"ok"`
	Seconds float64   `json:"seconds"`
	// What the restored etcd served: its revision and key count, and the
	// hash of its key bucket after it stopped.
	Revision int64  `json:"revision"`
	Keys     int64  `json:"keys"`
	KVHash   uint32 `json:"kvHash"`
	Error    string `json:"error,omitempty"`
}

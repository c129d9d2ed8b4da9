package model

// DataKind is what the local data dir holds, as far as the start decision
// cares.
type DataKind int

//go:generate go tool -modfile=../../tools/go.mod stringer -type=DataKind -linecomment
const (
	DataEmpty      DataKind = iota // empty
	DataHealthy                    // healthy
	DataCorrupt                    // corrupt
	DataLocked                     // locked
	DataUnreadable                 // unreadable
)

// Data describes the local data dir:
//   - DataEmpty: no member in it (missing, empty, or only a fresh skeleton);
//   - DataHealthy: a member whose WAL and db verify;
//   - DataCorrupt: a member etcd cannot start from;
//   - DataLocked: another process holds the db lock;
//   - DataUnreadable: cannot be read (permissions, I/O): never treated as
//     empty or corrupt.
type Data struct {
	Kind      DataKind
	ClusterID uint64 // from the WAL metadata; 0 when unknown
	MemberID  uint64
	Reason    string // why corrupt, locked or unreadable
}

// Marker is what the agent recorded once its member was running: the proof
// that this host was part of the cluster.
type Marker struct {
	ClusterID uint64 `json:"clusterID"`
	MemberID  uint64 `json:"memberID"`
}

// AgentRecord is what each live agent publishes about itself in the
// cluster, bound to a lease: it disappears when the agent dies.
type AgentRecord struct {
	Name       string   `json:"name"`
	Generation string   `json:"generation"`
	Members    []string `json:"members"`
	Phase      string   `json:"phase"`
	Decision   string   `json:"decision"`
	Addr       string   `json:"addr,omitempty"`
}

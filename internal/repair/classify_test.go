package repair

import (
	"encoding/json"
	"strings"
	"testing"
)

// zl builds a zap JSON line as etcd prints it (stacktrace omitted).
func zl(level, caller, msg, err string) string {
	f := map[string]string{"level": level, "ts": "2026-11-29T19:58:53.745923Z", "caller": caller, "msg": msg}
	if err != "" {
		f["error"] = err
	}
	b, _ := json.Marshal(f)
	return string(b)
}

// Lines copied from etcd v3.7.3 runs on damaged data dirs (see
// TestInspectRealDataDirs), stacktrace fields cut.
const (
	realCRCFatal     = `{"level":"fatal","ts":"2026-11-29T19:58:53.745923Z","caller":"etcdmain/etcd.go:157","msg":"discovery failed","error":"walpb: crc mismatch: expected: cab9c208 computed: 797144ee: in file '0000000000000000-0000000000000000.wal' at position: 32960","stacktrace":"go.etcd.io/etcd/server/v3/etcdmain.startEtcdOrProxyV2\n\t/root/go/pkg/mod/go.etcd.io/etcd/server/v3@v3.7.3/etcdmain/etcd.go:157"}`
	realCRCError     = `{"level":"error","ts":"2026-11-29T19:58:53.745543Z","caller":"etcdserver/server.go:298","msg":"bootstrap failed","error":"walpb: crc mismatch: expected: cab9c208 computed: 797144ee: in file '0000000000000000-0000000000000000.wal' at position: 32960"}`
	realUnrepairable = `{"level":"fatal","ts":"2026-11-29T19:58:54.222040Z","caller":"etcdserver/bootstrap.go:647","msg":"failed to read WAL, cannot be repaired","error":"unexpected EOF: [wal] max entry size limit exceeded when reading \"0000000000000000-0000000000000000.wal\", recBytes: 1095216661554, fileSize(131560) - offset(63200) - padBytes(6) = entryLimit(68354)"}`
	realOpenDB       = `{"level":"panic","ts":"2026-11-29T19:58:54.435468Z","caller":"backend/backend.go:215","msg":"failed to open database","path":"/var/lib/etcd/member/snap/db","error":"invalid database","stacktrace":"go.etcd.io/etcd/server/v3/storage/backend.newBackend\n\t/root/go/pkg/mod/go.etcd.io/bbolt@v1.5.0/db.go:297"}`
	realBoltMeta     = `{"level":"error","ts":"2026-11-29T19:58:54.434843Z","logger":"bbolt","caller":"bbolt@v1.5.0/db.go:297","msg":"both meta pages are invalid, meta0: invalid database, meta1: invalid database"}`
	realNoSnapDB     = `{"level":"panic","ts":"2026-11-29T19:58:54.601974Z","caller":"etcdserver/bootstrap.go:442","msg":"failed to recover v3 backend from snapshot","error":"failed to find database snapshot file (snap: snapshot file doesn't exist)"}`
	realRepaired     = `{"level":"info","ts":"2026-11-29T19:55:17.578338Z","caller":"etcdserver/bootstrap.go:652","msg":"repaired WAL","error":"unexpected EOF: [wal] max entry size limit exceeded when reading \"0000000000000005-000000000000024d.wal\""}`
	realNotReady     = `{"level":"warn","ts":"2026-11-29T19:55:10.893951Z","caller":"etcdserver/server.go:1838","msg":"failed to publish local member to cluster through raft","local-member-id":"91ac80e3d53d9571","publish-timeout":"5.2s","error":"etcdserver: request timed out, possibly due to previous leader failure"}`
)

// Lines of etcd v3.7.3's server/etcdserver/corrupt.go, with the fields of
// its own tests' output (go test -v -run 'TestCompactHashCheck|TestPeriodicCheck'
// go.etcd.io/etcd/server/v3/etcdserver) in the JSON form etcd logs. The
// checks run on the leader only: leader-id is the member that logs.
const (
	// The leader's own hash is in the minority: its ID is among peer-ids
	// (etcd raises the CORRUPT alarm for it).
	realCompactHashSelf = `{"level":"error","ts":"2026-11-30T14:54:06.033Z","caller":"etcdserver/corrupt.go:378","msg":"Detected compaction hash mismatch","leader-id":"1","leader-revision":2,"leader-compact-revision":1,"leader-hash":2,"peer-hash":2,"peer-ids":"1","quorum-exist":true}`
	// The leader is in the majority; the peers named are corrupt.
	realCompactHashPeer  = `{"level":"error","ts":"2026-11-30T14:54:06.032Z","caller":"etcdserver/corrupt.go:378","msg":"Detected compaction hash mismatch","leader-id":"1","leader-revision":2,"leader-compact-revision":1,"leader-hash":2,"peer-hash":3,"peer-ids":"2b","quorum-exist":true}`
	realCompactHashPeers = `{"level":"error","ts":"2026-11-30T14:54:06.032Z","caller":"etcdserver/corrupt.go:378","msg":"Detected compaction hash mismatch","leader-id":"1","leader-revision":2,"leader-compact-revision":1,"leader-hash":2,"peer-hash":7,"peer-ids":"2c,2d","quorum-exist":true}`
	// No hash has a quorum: etcd cannot tell who is corrupt, raises the
	// alarm for member 0, and logs every group, the leader's own too.
	realCompactHashNoQuorum    = `{"level":"error","ts":"2026-11-30T14:54:06.033Z","caller":"etcdserver/corrupt.go:360","msg":"Detected compaction hash mismatch but cannot identify the corrupted members, so intentionally set the memberID as 0","leader-id":"1","leader-revision":2,"leader-compact-revision":1,"leader-hash":2}`
	realCompactHashNoQuorumOwn = `{"level":"error","ts":"2026-11-30T14:54:06.033Z","caller":"etcdserver/corrupt.go:378","msg":"Detected compaction hash mismatch","leader-id":"1","leader-revision":2,"leader-compact-revision":1,"leader-hash":2,"peer-hash":2,"peer-ids":"1,2a,2f","quorum-exist":false}`
	// PeriodicCheck: the leader blames a follower.
	realFollowerHash = `{"level":"warn","ts":"2026-11-30T14:54:06.031Z","caller":"etcdserver/corrupt.go:251","msg":"same compact revision then hashes must match","leader-compact-revision":2,"leader-hash":1,"follower-compact-revision":1,"follower-hash":2,"follower-peer-id":"29a"}`
	realFollowerRev  = `{"level":"warn","ts":"2026-11-30T14:54:06.030Z","caller":"etcdserver/corrupt.go:229","msg":"revision from follower must be less than or equal to leader's","leader-revision":0,"follower-revision":10,"follower-peer-id":"58"}`
	// PeriodicCheck: the leader's own hash changed at the same revision;
	// it raises the alarm for itself.
	realSelfHash = `{"level":"warn","ts":"2026-11-30T14:54:06.030Z","caller":"etcdserver/corrupt.go:208","msg":"found hash mismatch","revision-1":1,"compact-revision-1":1,"hash-1":1,"revision-2":1,"compact-revision-2":1,"hash-2":2}`
	// bbolt v1.5.0 db.go:517 logs through etcd's zap logger when mmap fails.
	realBoltMmap = `{"level":"error","ts":"2026-11-30T14:54:06.030Z","logger":"bbolt","caller":"bbolt@v1.5.0/db.go:517","msg":"[GOOS: linux, GOARCH: amd64] mmap failed, size: 10737418240, error: cannot allocate memory"}`
)

// goPanic is the plain text Go prints after a zap Panic or a panic.
func goPanic(header string, frames ...string) []string {
	out := []string{header, "", "goroutine 1 [running]:"}
	for _, f := range frames {
		out = append(out, f+"(0xc000157260, 0x5a)", "\t/root/go/pkg/mod/"+strings.SplitN(f, ".", 2)[0]+"/x.go:213 +0x3f2")
	}
	return out
}

// Copied from an etcd v3.7.3 run on a db truncated below its data: a fault
// on bbolt's mmap, the faulting goroutine printed first.
var realFault = []string{
	"unexpected fault address 0x7f46dc0ce000",
	"fatal error: fault",
	"[signal SIGBUS: bus error code=0x2 addr=0x7f46dc0ce000 pc=0x101c68b]",
	"",
	"goroutine 125 gp=0xc00021eb40 m=0 mp=0x258e6c0 [running]:",
	"runtime.throw({0x198c017?, 0x165a0bc00?})",
	"\t/usr/local/go/src/runtime/panic.go:1229 +0x48 fp=0xc000085c30 sp=0xc000085c00 pc=0x4ca2a8",
	"go.etcd.io/bbolt/internal/common.(*Page).FastCheck(0x7f46dc0ce000, 0xce)",
	"\t/root/go/pkg/mod/go.etcd.io/bbolt@v1.5.0/internal/common/page.go:91 +0x2b fp=0xc000085cf8 sp=0xc000085c90 pc=0x101c68b",
	"go.etcd.io/bbolt.(*Tx).page(0xc0004aa0e0, 0xce)",
	"\t/root/go/pkg/mod/go.etcd.io/bbolt@v1.5.0/tx.go:640 +0x139 fp=0xc000085d60 sp=0xc000085cf8 pc=0x1054619",
	"created by go.etcd.io/bbolt.(*DB).freepages in goroutine 95",
	"\t/root/go/pkg/mod/go.etcd.io/bbolt@v1.5.0/db.go:1293 +0x293",
	"",
	"goroutine 1 gp=0xc0000081e0 m=nil [runnable]:",
	"go.etcd.io/etcd/server/v3/storage.OpenBackend({{0xc000056021, 0x2}, ...}, ...)",
	"\t/root/go/pkg/mod/go.etcd.io/etcd/server/v3@v3.7.3/storage/backend.go:87 +0x336 fp=0xc00042b928 sp=0xc00042b738 pc=0x1297c76",
}

func TestClassify(t *testing.T) {
	tests := []struct {
		name string
		exit Exit
		want Class
	}{
		// none
		{"exit 0", Exit{Tail: []string{zl("info", "embed/etcd.go:414", "closing etcd server", "")}}, ClassNone},
		{"exit 0 empty log", Exit{}, ClassNone},
		{"SIGTERM as Go spells it", Exit{Code: -1, Signal: "terminated"}, ClassNone},
		{"SIGINT", Exit{Code: -1, Signal: "SIGINT"}, ClassNone},
		{"SIGTERM after a repaired WAL", Exit{Code: -1, Signal: "signal: terminated", Tail: []string{realRepaired}}, ClassNone},

		// corrupt: WAL (docs table rows 1-2)
		{"crc mismatch, real", Exit{Code: 1, Tail: []string{realCRCError, realCRCFatal}}, ClassCorrupt},
		{"crc mismatch behind warnings", Exit{Code: 1, Tail: []string{realCRCFatal, realNotReady}}, ClassCorrupt},
		{"unrepairable torn record, real", Exit{Code: 1, Tail: []string{realRepaired, realUnrepairable}}, ClassCorrupt},
		{"snapshot mismatch", Exit{Code: 1, Tail: []string{zl("fatal", "etcdserver/bootstrap.go:647", "failed to read WAL, cannot be repaired", "wal: snapshot mismatch")}}, ClassCorrupt},
		{"snapshot not found", Exit{Code: 1, Tail: []string{zl("fatal", "etcdmain/etcd.go:157", "discovery failed", "wal: snapshot not found")}}, ClassCorrupt},
		{"slice bounds", Exit{Code: 1, Tail: []string{zl("fatal", "etcdserver/bootstrap.go:647", "failed to read WAL, cannot be repaired", "wal: slice bounds out of range, snapshot[Index: 505, Term: 2], current entry[Index: 900, Term: 2], len(ents): 3")}}, ClassCorrupt},
		{"conflicting metadata", Exit{Code: 1, Tail: []string{zl("fatal", "etcdserver/bootstrap.go:647", "failed to read WAL, cannot be repaired", "wal: conflicting metadata found")}}, ClassCorrupt},
		{"unexpected block type", Exit{Code: 1, Tail: []string{zl("fatal", "etcdserver/bootstrap.go:647", "failed to read WAL, cannot be repaired", "unexpected block type 9")}}, ClassCorrupt},
		{"repair failed", Exit{Code: 1, Tail: []string{zl("fatal", "etcdserver/bootstrap.go:650", "failed to repair WAL", "unexpected EOF")}}, ClassCorrupt},
		{"open WAL: no file for snapshot", Exit{Code: 1, Tail: []string{zl("fatal", "etcdserver/bootstrap.go:635", "failed to open WAL", "openAtIndex failed: [openAtIndex] selectWALFiles failed: wal: file not found which matches the snapshot index '505'")}}, ClassCorrupt},
		{"WAL file name", Exit{Code: 2, Tail: append([]string{zl("panic", "wal/util.go:46", "failed to parse WAL file name", "expected integer")}, goPanic("panic: failed to parse WAL file name", "go.etcd.io/etcd/server/v3/storage/wal.searchIndex")...)}, ClassCorrupt},

		// corrupt: db (docs table rows 3-4)
		{"invalid database, real", Exit{Code: 2, Tail: append([]string{realBoltMeta, realOpenDB}, goPanic("panic: failed to open database", "go.etcd.io/etcd/server/v3/storage/backend.newBackend")...)}, ClassCorrupt},
		{"checksum error", Exit{Code: 2, Tail: []string{zl("panic", "backend/backend.go:215", "failed to open database", "checksum error")}}, ClassCorrupt},
		{"only the Go panic text survived", Exit{Code: 2, Tail: goPanic("panic: failed to open database", "go.etcd.io/etcd/server/v3/storage/backend.newBackend")}, ClassCorrupt},
		{"db missing for snapshot, real", Exit{Code: 2, Tail: []string{realNoSnapDB}}, ClassCorrupt},
		{"db behind snapshot", Exit{Code: 1, Tail: []string{zl("fatal", "etcdmain/etcd.go:157", "discovery failed", "database file (/var/lib/etcd/member/snap/db index 400) does not match with snapshot (index 505)")}}, ClassCorrupt},
		{"db missing", Exit{Code: 1, Tail: []string{zl("fatal", "etcdmain/etcd.go:157", "discovery failed", "database file (/var/lib/etcd/member/snap/db) of the backend is missing")}}, ClassCorrupt},
		{"bbolt fault, real", Exit{Code: 2, Tail: realFault}, ClassCorrupt},
		{"bbolt fault, header cut off the tail", Exit{Code: 2, Tail: realFault[5:]}, ClassCorrupt},
		{"bbolt assertion panic", Exit{Code: 2, Tail: goPanic("panic: assertion failed: Page expected to be: 206, but self identifies as 0", "go.etcd.io/bbolt/internal/common.Assert", "go.etcd.io/bbolt.(*Tx).page")}, ClassCorrupt},

		// corrupt: diverged / running (docs table rows 5-6)
		{"initial hash check", Exit{Code: 1, Tail: []string{
			zl("error", "embed/etcd.go:274", "checkInitialHashKV failed", "8e9e05c52164694d found data inconsistency with peers"),
			zl("fatal", "etcdmain/etcd.go:157", "discovery failed", "8e9e05c52164694d found data inconsistency with peers")}}, ClassCorrupt},
		{"leader's own hash changed, real", Exit{Code: 1, Tail: []string{realSelfHash}}, ClassCorrupt},
		{"leader in the minority of a compaction hash check, real", Exit{Code: 1, Tail: []string{realCompactHashSelf}}, ClassCorrupt},

		// removed / identity
		{"removed, exit 0", Exit{Tail: []string{
			zl("warn", "etcdserver/server.go:849", "server error", "the member has been permanently removed from the cluster"),
			zl("warn", "etcdserver/server.go:850", "data-dir used by this member must be removed", "")}}, ClassRemoved},
		{"removed, only the second line", Exit{Tail: []string{zl("warn", "etcdserver/server.go:850", "data-dir used by this member must be removed", "")}}, ClassRemoved},
		{"cluster ID mismatch", Exit{Code: 1, Tail: []string{zl("error", "rafthttp/util.go:100", "request sent was ignored due to cluster ID mismatch", "")}}, ClassRemoved},
		{"request cluster ID mismatch", Exit{Code: 1, Tail: []string{zl("warn", "rafthttp/http.go:513", "request cluster ID mismatch", "")}}, ClassRemoved},

		// misconfiguration: never move data
		{"local name", Exit{Code: 1, Tail: []string{zl("fatal", "etcdmain/etcd.go:157", "discovery failed", `couldn't find local name "m4" in the initial cluster configuration`)}}, ClassMisconfig},
		{"member count", Exit{Code: 1, Tail: []string{zl("fatal", "etcdmain/etcd.go:157", "discovery failed", "error validating peerURLs {ClusterID:cdf818194e3a8c32 Members:[...] RemovedMemberIDs:[]}: member count is unequal")}}, ClassMisconfig},
		{"peer URLs", Exit{Code: 1, Tail: []string{zl("fatal", "etcdmain/etcd.go:157", "discovery failed", "error validating peerURLs {...}: PeerURLs: no match found for existing member (8e9e05c52164694d, [http://10.0.0.1:2380]), last resolver error (<nil>)")}}, ClassMisconfig},
		{"already bootstrapped", Exit{Code: 1, Tail: []string{zl("fatal", "etcdmain/etcd.go:157", "discovery failed", "member 8e9e05c52164694d has already been bootstrapped")}}, ClassMisconfig},
		{"schema version", Exit{Code: 1, Tail: []string{
			zl("error", "etcdserver/bootstrap.go:269", "Failed to validate schema", `version "3.8.0" is not supported`),
			zl("fatal", "etcdmain/etcd.go:157", "discovery failed", `version "3.8.0" is not supported`)}}, ClassMisconfig},
		{"downgrade", Exit{Code: 1, Tail: []string{zl("fatal", "etcdmain/etcd.go:157", "discovery failed", "cannot downgrade storage, WAL contains newer entries, as the target version (3.6.0) is lower than the version (3.7.0) detected from WAL logs")}}, ClassMisconfig},
		{"data dir permission", Exit{Code: 1, Tail: []string{zl("fatal", "etcdmain/etcd.go:157", "discovery failed", "cannot access data directory: mkdir /var/lib/etcd: permission denied")}}, ClassMisconfig},
		{"db permission is not corruption", Exit{Code: 2, Tail: append([]string{zl("panic", "backend/backend.go:215", "failed to open database", "open /var/lib/etcd/member/snap/db: permission denied")}, goPanic("panic: failed to open database", "go.etcd.io/etcd/server/v3/storage/backend.newBackend")...)}, ClassMisconfig},
		{"WAL permission is not corruption", Exit{Code: 1, Tail: []string{zl("fatal", "etcdserver/bootstrap.go:635", "failed to open WAL", "openAtIndex failed: [openAtIndex] openWALFiles failed: [openWALFiles] fileutil.TryLockFile failed: open /var/lib/etcd/member/wal/0000000000000000-0000000000000000.wal: permission denied")}}, ClassMisconfig},
		{"read-only fs", Exit{Code: 1, Tail: []string{zl("fatal", "etcdmain/etcd.go:157", "discovery failed", "cannot write to WAL directory: open /var/lib/etcd/member/wal/.touch: read-only file system")}}, ClassMisconfig},
		{"address in use", Exit{Code: 1, Tail: []string{
			zl("error", "embed/etcd.go:582", "creating peer listener failed", "listen tcp 10.0.0.1:2380: bind: address already in use"),
			zl("fatal", "etcdmain/etcd.go:157", "discovery failed", "listen tcp 10.0.0.1:2380: bind: address already in use")}}, ClassMisconfig},
		{"listener failed", Exit{Code: 1, Tail: []string{zl("fatal", "etcdmain/etcd.go:172", "listener failed", "accept tcp 10.0.0.1:2379: use of closed network connection")}}, ClassMisconfig},
		{"missing CA file", Exit{Code: 1, Tail: []string{zl("fatal", "etcdmain/etcd.go:157", "discovery failed", "open /etc/kubernetes/pki/etcd/ca.crt: no such file or directory")}}, ClassMisconfig},
		{"bad certificate", Exit{Code: 1, Tail: []string{zl("fatal", "etcdmain/etcd.go:157", "discovery failed", "tls: failed to find any PEM data in certificate input")}}, ClassMisconfig},
		{"unknown flag, plain text exit 2", Exit{Code: 2, Tail: []string{"flag provided but not defined: -experimental-initial-corrupt-check", "Usage:", "  etcd [flags]"}}, ClassMisconfig},
		{"bad flag value", Exit{Code: 2, Tail: []string{`invalid value "maybe" for flag -initial-cluster-state: invalid value "maybe"`}}, ClassMisconfig},
		{"flags do not verify", Exit{Code: 1, Tail: []string{zl("warn", "etcdmain/etcd.go:65", "failed to verify flags", "--election-timeout[50ms] should be at least as 5 times as --heartbeat-interval[100ms]")}}, ClassMisconfig},
		{"initial cluster mismatch", Exit{Code: 1, Tail: []string{zl("warn", "etcdmain/etcd.go:141", "failed to start", "--initial-cluster has m1=http://10.0.0.1:2380 but missing from --initial-advertise-peer-urls=http://10.0.0.9:2380")}}, ClassMisconfig},

		// resource
		{"disk full", Exit{Code: 1, Tail: []string{zl("fatal", "etcdserver/raft.go:265", "failed to save Raft hard state and entries", "write /var/lib/etcd/member/wal/0000000000000003-00000000000001d9.wal: no space left on device")}}, ClassResource},
		{"quota exceeded", Exit{Code: 1, Tail: []string{zl("warn", "etcdserver/server.go:1838", "failed to publish local member to cluster through raft", "etcdserver: mvcc: database space exceeded")}}, ClassResource},
		{"mmap out of memory is not corruption", Exit{Code: 2, Tail: []string{zl("panic", "backend/backend.go:215", "failed to open database", "cannot allocate memory")}}, ClassResource},

		// resource: the disk, the file system or the host failed a read;
		// the data may be fine, and moving it aside does not help.
		{"db EIO is not corruption", Exit{Code: 2, Tail: append([]string{zl("panic", "backend/backend.go:215", "failed to open database", "read /var/lib/etcd/member/snap/db: input/output error")}, goPanic("panic: failed to open database", "go.etcd.io/etcd/server/v3/storage/backend.newBackend")...)}, ClassResource},
		{"WAL EIO is not corruption", Exit{Code: 1, Tail: []string{zl("fatal", "etcdserver/bootstrap.go:647", "failed to read WAL, cannot be repaired", "read /var/lib/etcd/member/wal/0000000000000000-0000000000000000.wal: input/output error")}}, ClassResource},
		{"WAL ESTALE (NFS) is not corruption", Exit{Code: 1, Tail: []string{zl("fatal", "etcdserver/bootstrap.go:635", "failed to open WAL", "openAtIndex failed: [openAtIndex] openWALFiles failed: [openWALFiles] fileutil.TryLockFile failed: open /var/lib/etcd/member/wal/0000000000000000-0000000000000000.wal: stale file handle")}}, ClassResource},
		{"db ENOTCONN (FUSE gone) is not corruption", Exit{Code: 2, Tail: []string{zl("panic", "backend/backend.go:215", "failed to open database", "open /var/lib/etcd/member/snap/db: transport endpoint is not connected")}}, ClassResource},
		{"db EMFILE is not corruption", Exit{Code: 2, Tail: []string{zl("panic", "backend/backend.go:215", "failed to open database", "open /var/lib/etcd/member/snap/db: too many open files")}}, ClassResource},
		{"ENFILE is not corruption", Exit{Code: 1, Tail: []string{zl("fatal", "etcdserver/bootstrap.go:635", "failed to open WAL", "open /var/lib/etcd/member/wal/0000000000000000-0000000000000000.wal: too many open files in system")}}, ClassResource},
		{"mmap too large is not corruption", Exit{Code: 2, Tail: []string{zl("panic", "backend/backend.go:215", "failed to open database", "mmap too large")}}, ClassResource},
		{"mmap allocate error is not corruption", Exit{Code: 2, Tail: []string{zl("panic", "backend/backend.go:215", "failed to open database", "mmap allocate error: invalid argument")}}, ClassResource},
		{"bbolt's mmap failure line", Exit{Code: 1, Tail: []string{realBoltMmap}}, ClassResource},
		{"Go out of memory inside bbolt is not corruption", Exit{Code: 2, Tail: append([]string{"runtime: out of memory: cannot allocate 4194304-byte block (3997696000 in use)"},
			goPanic("fatal error: out of memory", "go.etcd.io/bbolt.(*Tx).page", "go.etcd.io/bbolt.(*Cursor).search")...)}, ClassResource},
		{"Go runtime out of memory inside bbolt", Exit{Code: 2, Tail: goPanic("fatal error: runtime: out of memory", "go.etcd.io/bbolt.(*DB).mmap")}, ClassResource},
		{"Go runtime cannot allocate memory inside bbolt", Exit{Code: 2, Tail: goPanic("fatal error: runtime: cannot allocate memory", "go.etcd.io/bbolt.(*DB).allocate")}, ClassResource},

		// transient
		{"peers unreachable at join", Exit{Code: 1, Tail: []string{zl("fatal", "etcdmain/etcd.go:157", "discovery failed", "cannot fetch cluster info from peer urls: could not retrieve cluster information from the given URLs")}}, ClassTransient},
		{"no leader", Exit{Code: 1, Tail: []string{zl("warn", "etcdserver/v3_server.go:920", "timed out waiting for read index response", "etcdserver: no leader")}}, ClassTransient},
		{"request timed out, real", Exit{Code: 1, Tail: []string{realNotReady}}, ClassTransient},
		{"not enough started members", Exit{Code: 1, Tail: []string{zl("warn", "etcdserver/server.go:1500", "rejecting member add request", "etcdserver: re-configuration failed due to not enough started members")}}, ClassTransient},
		{"too many learners", Exit{Code: 1, Tail: []string{zl("fatal", "etcdmain/etcd.go:157", "discovery failed", "membership: too many learner members in cluster")}}, ClassTransient},
		{"WAL locked by another etcd", Exit{Code: 1, Tail: []string{zl("fatal", "etcdserver/bootstrap.go:635", "failed to open WAL", "openAtIndex failed: [openAtIndex] openWALFiles failed: [openWALFiles] fileutil.TryLockFile failed: fileutil: file already locked")}}, ClassTransient},
		{"killed while waiting for the db flock", Exit{Code: -1, Signal: "killed", Tail: []string{zl("info", "storage/backend.go:89", "db file is flocked by another process, or taking too long", "")}}, ClassTransient},

		// unknown
		{"SIGKILL, by whom unknown (operator or OOM)", Exit{Code: -1, Signal: "SIGKILL", Tail: []string{realCRCError}}, ClassUnknown},
		{"SIGKILL by the OOM killer (its cgroup counted it)", Exit{Code: -1, Signal: "killed", OOM: true, Tail: []string{realCRCError}}, ClassResource},
		{"SIGSEGV", Exit{Code: -1, Signal: "segmentation fault"}, ClassUnknown},
		{"nil pointer in etcd", Exit{Code: 2, Tail: goPanic("panic: runtime error: invalid memory address or nil pointer dereference", "go.etcd.io/etcd/server/v3/etcdserver.(*EtcdServer).apply")}, ClassUnknown},
		{"fatal error elsewhere, bbolt idle in another goroutine", Exit{Code: 2, Tail: []string{
			"fatal error: concurrent map writes", "", "goroutine 7 [running]:",
			"go.etcd.io/etcd/server/v3/etcdserver.(*EtcdServer).apply(0xc0001)", "\t/x/server.go:1 +0x1", "",
			"goroutine 9 [select]:", "go.etcd.io/bbolt.(*DB).Begin(0xc0002)", "\t/x/db.go:1 +0x1"}}, ClassUnknown},
		{"info lines never decide", Exit{Code: 1, Tail: []string{realRepaired}}, ClassUnknown},

		// what a leader logs about OTHER members' data (etcdserver/corrupt.go
		// runs its periodic and compaction hash checks on the leader only)
		// is no evidence against this member's own data
		{"leader found a peer's compaction hash differ, real", Exit{Code: 1, Tail: []string{realCompactHashPeer}}, ClassUnknown},
		{"leader found two peers' compaction hash differ, real", Exit{Code: 1, Tail: []string{realCompactHashPeers}}, ClassUnknown},
		{"compaction hash groups without a quorum, leader's own group, real", Exit{Code: 1, Tail: []string{realCompactHashNoQuorum, realCompactHashNoQuorumOwn}}, ClassUnknown},
		{"compaction hash mismatch, plain text", Exit{Code: 1, Tail: []string{"Detected compaction hash mismatch but cannot identify the corrupted members, so intentionally set the memberID as 0"}}, ClassUnknown},
		{"follower's hash differs, real", Exit{Code: 1, Tail: []string{realFollowerHash}}, ClassUnknown},
		{"follower's revision ahead, real", Exit{Code: 1, Tail: []string{realFollowerRev}}, ClassUnknown},
		{"peer lines do not hide this member's own error", Exit{Code: 1, Tail: []string{realNotReady, realCompactHashPeer}}, ClassTransient},
		// a CORRUPT alarm on any member makes every member answer "corrupt
		// cluster" (applierV3Corrupt); the alarm names the corrupt member
		{"corrupt cluster is the alarm, not this member", Exit{Code: 1, Tail: []string{zl("warn", "etcdserver/server.go:1838", "failed to publish local member to cluster through raft", "etcdserver: corrupt cluster")}}, ClassUnknown},
		{"nothing recognisable", Exit{Code: 1, Tail: []string{zl("error", "x.go:1", "something odd", "boom")}}, ClassUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := Classify(tt.exit)
			if v.Class != tt.want {
				t.Fatalf("Classify = %v (%s; evidence %q), want %v", v.Class, v.Reason, v.Evidence, tt.want)
			}
			if v.Reason == "" || strings.Contains(v.Reason, "\n") {
				t.Errorf("Reason %q: want one non-empty line", v.Reason)
			}
			if v.Class != ClassNone && v.Evidence == "" {
				t.Errorf("no Evidence for %v", v.Class)
			}
		})
	}
}

// The deciding line, not the most recent one, is the evidence.
func TestClassifyEvidence(t *testing.T) {
	v := Classify(Exit{Code: 1, Tail: []string{realCRCError, realCRCFatal, realNotReady}})
	if v.Evidence != oneLine(realCRCFatal) {
		t.Errorf("Evidence = %q, want the fatal line", v.Evidence)
	}
	if !strings.Contains(v.Reason, "walpb: crc mismatch") {
		t.Errorf("Reason = %q, want the error field in it", v.Reason)
	}
}

func TestClassString(t *testing.T) {
	for c, want := range map[Class]string{ClassNone: "none", ClassCorrupt: "corrupt", ClassRemoved: "removed",
		ClassMisconfig: "misconfig", ClassResource: "resource", ClassTransient: "transient", ClassUnknown: "unknown", Class(42): "Class(42)"} {
		if c.String() != want {
			t.Errorf("%d.String() = %q, want %q", int(c), c.String(), want)
		}
	}
}

func TestContainsPattern(t *testing.T) {
	for _, tt := range []struct {
		s, pat string
		want   bool
	}{
		{"wal: file sequence numbers (starting from 3) do not increase continuously", "wal: file sequence numbers * do not increase continuously", true},
		{"database file (/x/db index 4) does not match with snapshot (index 5)", "database file (* index *) does not match with snapshot", true},
		{"does not match with snapshot database file", "database file * does not match", false},
		{"anything", "", true},
	} {
		if got := containsPattern(tt.s, tt.pat); got != tt.want {
			t.Errorf("containsPattern(%q, %q) = %v", tt.s, tt.pat, got)
		}
	}
}

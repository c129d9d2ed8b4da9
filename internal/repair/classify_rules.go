package repair

import (
	"slices"
	"strings"

	"go.etcd.io/etcd/client/pkg/v3/fileutil"
	"go.etcd.io/etcd/server/v3/etcdserver/api/membership"
	"go.etcd.io/etcd/server/v3/etcdserver/api/rafthttp"
	"go.etcd.io/etcd/server/v3/etcdserver/api/snap"
	servererrors "go.etcd.io/etcd/server/v3/etcdserver/errors"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
)

// rule is one row of the failure table (docs/etcd-failure-signals.md).
// Error texts come from etcd's exported sentinel errors where there is one,
// so they follow etcd; the rest are copied from the etcd v3.7.3 source file
// named next to them.
type rule struct {
	class  Class
	reason string
	// msgs are zap "msg" values: constants in etcd's source, compared exactly
	// on JSON lines (and searched for in plain text, e.g. "panic: <msg>").
	msgs []string
	// errs are fragments of an error text; "*" stands for any text.
	errs []string
	// blame, when set, makes the rule match a msg only on a JSON line whose
	// fields name the member that logged it (see blame).
	blame *blame
	// notEvidence: the line is about other members, and says nothing about
	// this member's data; it never decides an exit (classifyLine skips it).
	notEvidence bool
}

// blame tells a line about the logging member from one about its peers:
// the line matches only if the ID in field self is among the
// comma-separated IDs in field named, and field sure, if set, is true.
type blame struct{ self, named, sure string }

func (b blame) namesSelf(fields map[string]any) bool {
	self, _ := fields[b.self].(string)
	named, _ := fields[b.named].(string)
	if sure, _ := fields[b.sure].(bool); b.sure != "" && !sure {
		return false
	}
	return self != "" && slices.Contains(strings.Split(named, ","), self)
}

// rules are tried in order; the error field of a line is tried against
// every rule before its msg is (see classifyLine).
var rules = []rule{
	// The environment comes first: "failed to open database" or "failed to
	// open WAL" caused by permissions, a full disk, a failing disk, a held
	// lock or a lack of memory is not corruption, and must never make the
	// agent move data (field-notes §3).
	accessRule,
	{
		class: ClassResource, reason: "the disk is full",
		errs: []string{"no space left on device", "disk quota exceeded"},
	},
	unreadableRule,
	exhaustedRule,
	lockedRule,
	corruptWAL,
	corruptDB,
	corruptRunning,
	corruptCompactHash,
	peersCorrupt,
	removedRule,
	misconfigFlags,
	misconfigMembership,
	misconfigDataDir,
	misconfigVersion,
	misconfigListener,
	misconfigTLS,
	{
		// NOSPACE alarm: needs compaction + defrag + alarm disarm, not a rejoin.
		class: ClassResource, reason: "the etcd database quota is exhausted",
		errs: []string{"database space exceeded", servererrors.ErrNoSpace.Error()},
	},
	transient,
}

// accessRule: permissions and read-only mounts.
var accessRule = rule{
	class: ClassMisconfig, reason: "etcd cannot access its files",
	errs: []string{"permission denied", "operation not permitted", "read-only file system"},
}

// exhaustedRule: ENOMEM, EMFILE/ENFILE (Go's syscall error texts), bbolt's
// mmap errors (bbolt v1.5.0 db.go: "mmap allocate error", "mmap too large",
// "mmap size calculation error", "mmap failed"), and the Go runtime's own
// out-of-memory crash ("fatal error: out of memory", "fatal error: runtime:
// out of memory", "runtime: out of memory: cannot allocate N-byte block":
// runtime/mheap.go, malloc.go), which bbolt's frames in the trace must not
// turn into corruption.
var exhaustedRule = rule{
	class: ClassResource, reason: "out of memory, address space or file descriptors",
	errs: []string{"cannot allocate memory", "too many open files", "mmap", "out of memory"},
}

// unreadableRule: the disk, the file system or its server failed a read or
// write (EIO, ESTALE, ENOTCONN: Go's syscall error texts). The data may be
// intact; a new data dir on the same disk would fail the same way.
var unreadableRule = rule{
	class: ClassResource, reason: "the disk or file system failed (I/O error, stale NFS handle, FUSE gone): the data may be intact",
	errs: []string{"input/output error", "stale file handle", "stale NFS file handle", "transport endpoint is not connected"},
}

// lockedRule: another process holds a data file. etcd waits for bbolt's
// flock forever and says so (at info level) after 10 s (storage/backend.go
// OpenBackend); WAL files use fileutil locks and fail at once.
var lockedRule = rule{
	class: ClassTransient, reason: "a data file is locked by another process",
	msgs: []string{"db file is flocked by another process, or taking too long"},
	errs: []string{fileutil.ErrLocked.Error()},
}

// corruptWAL: etcdserver/bootstrap.go openWALFromSnapshot and storage/wal.
// etcd only repairs a torn tail (io.ErrUnexpectedEOF) itself; these are the
// errors it gives up on.
var corruptWAL = rule{
	class: ClassCorrupt, reason: "the WAL is corrupt and etcd cannot repair it",
	msgs: []string{
		"failed to read WAL, cannot be repaired",
		"failed to repair WAL",
		"failed to open WAL",
		"failed to parse WAL file name", // storage/wal/util.go
		"failed to parse WAL name",      // storage/wal/wal.go
	},
	errs: []string{
		walpb.ErrCRCMismatch.Error(),
		wal.ErrSnapshotMismatch.Error(),
		wal.ErrSnapshotNotFound.Error(),
		wal.ErrSliceOutOfRange.Error(),
		wal.ErrMetadataConflict.Error(),
		wal.ErrFileNotFound.Error(), // also "wal: file not found which matches the snapshot index"
		"unexpected block type",
		"wal: file sequence numbers * do not increase continuously",
	},
}

// corruptDB: the bbolt file or its relation to the WAL snapshot
// (etcdserver/bootstrap.go, storage/backend.go, storage/backend/backend.go).
var corruptDB = rule{
	class: ClassCorrupt, reason: "the database file is damaged or does not match the WAL",
	msgs: []string{
		"failed to open database", // bbolt: invalid database, checksum error, version mismatch
		"failed to recover v3 backend from snapshot",
		"failed to open snapshot backend",
		"failed to restore mvcc store",
		"failed to unmarshal mvccpb.KeyValue",
	},
	errs: []string{
		"database file (* index *) does not match with snapshot",
		"database file (*) of the backend is missing",
		"failed to find database snapshot file",
		snap.ErrNoDBSnapshot.Error(),
		snap.ErrCRCMismatch.Error(),
	},
}

// corruptRunning: the hash checks of etcdserver/corrupt.go that blame the
// member that logs. InitialCheck (before serving) returns "<local ID> found
// data inconsistency with peers" and etcd exits; PeriodicCheck, on the
// leader, logs "found hash mismatch" when its own hash changed at the same
// revision, and raises the CORRUPT alarm for itself.
var corruptRunning = rule{
	class: ClassCorrupt, reason: "this member's data diverged from its peers",
	msgs: []string{"found hash mismatch"},
	errs: []string{"found data inconsistency with peers"},
}

// corruptCompactHash: CompactHashCheck, on the leader, groups the members
// by hash and logs one line per group outside the majority, with the
// group's IDs in peer-ids; the leader-id is the logging member. Only when
// its own ID is in such a group and a majority exists is it the corrupt
// one. Without a majority (quorum-exist false) etcd cannot tell and raises
// the alarm for member 0: nobody's data may be moved on that.
var corruptCompactHash = rule{
	class: ClassCorrupt, reason: "this member's data diverged from its peers (compaction hash check)",
	msgs:  []string{"Detected compaction hash mismatch"},
	blame: &blame{self: "leader-id", named: "peer-ids", sure: "quorum-exist"},
}

// peersCorrupt: what a leader logs about other members' data (corrupt.go
// PeriodicCheck names a follower-peer-id, CompactHashCheck the peer-ids),
// and the error every member returns while any member has a CORRUPT alarm
// (servererrors.ErrCorrupt, from applierV3Corrupt). The alarm names the
// corrupt member; the agent judges alarms by that name.
var peersCorrupt = rule{
	notEvidence: true,
	reason:      "another member's data diverged; not evidence against this member's data",
	msgs: []string{
		"Detected compaction hash mismatch",
		"Detected compaction hash mismatch but cannot identify the corrupted members, so intentionally set the memberID as 0",
		"revision from follower must be less than or equal to leader's",
		"compact revision from follower must be less than or equal to leader's",
		"same compact revision then hashes must match",
	},
	errs: []string{servererrors.ErrCorrupt.Error()},
}

// removedRule: a removed member logs the error then exits 0
// (etcdserver/server.go); a member whose data dir belongs to another
// cluster is told so by its peers (rafthttp). Before acting, the start
// decision (reconcile.DecideStart) compares the data dir's cluster and
// member IDs, from Inspect, with the live cluster.
var removedRule = rule{
	class: ClassRemoved, reason: "this member was removed from the cluster or has another cluster's identity",
	msgs: []string{
		"data-dir used by this member must be removed",
		"request sent was ignored due to cluster ID mismatch",                // rafthttp/util.go
		"request sent was ignored by remote peer due to cluster ID mismatch", // rafthttp/stream.go
		"request cluster ID mismatch",                                        // rafthttp/http.go
		"ignored streaming request; ID mismatch",                             // rafthttp/http.go
		"cluster ID mismatch",                                                // etcdserver/corrupt.go
	},
	errs: []string{
		"permanently removed from the cluster", // rafthttp errMemberRemoved (unexported)
		rafthttp.ErrClusterIDMismatch.Error(),
		membership.ErrIDRemoved.Error(),
	},
}

// misconfigFlags: etcdmain/etcd.go ("failed to verify flags", exit 1), Go's
// flag package (plain text, exit 2), embed/config.go Validate, config/config.go.
var misconfigFlags = rule{
	class: ClassMisconfig, reason: "etcd's flags are invalid",
	msgs: []string{"failed to verify flags"},
	errs: []string{
		"flag provided but not defined",
		"invalid value * for flag",
		"is not a valid flag",
		"multiple discovery or bootstrap flags are set",
		"--advertise-client-urls is required",
		"--initial-cluster has",
		"--initial-advertise-peer-urls",
		"--advertise-client-urls",
		"--election-timeout",
		"--heartbeat-interval",
		"initial cluster unset and no discovery endpoints found",
		"has duplicate url",
		"expected IP in URL for binding",
		"unexpected clusterState",
		"failed to resolve * to match --initial-cluster",
		"discovery URL should not be set",
	},
}

// misconfigMembership: the flags disagree with the cluster's membership
// (config/config.go, etcdserver/api/membership/cluster.go, bootstrap.go).
// A fresh data dir fails the same way, so nothing is moved.
var misconfigMembership = rule{
	class: ClassMisconfig, reason: "the member's cluster flags do not match the cluster",
	errs: []string{
		"couldn't find local name * in the initial cluster configuration",
		"member count is unequal",
		"PeerURLs: no match found for existing member",
		"has already been bootstrapped",
		"incompatible with current running cluster",
	},
}

// misconfigDataDir: etcdserver/bootstrap.go and etcdmain/etcd.go.
var misconfigDataDir = rule{
	class: ClassMisconfig, reason: "etcd cannot use its data directory",
	msgs: []string{
		"invalid datadir; both member and proxy directories exist",
		"failed to list data directory",
		"failed to create snapshot directory",
	},
	errs: []string{
		"cannot access data directory",
		"cannot access member directory",
		"cannot write to WAL directory",
		"cannot write to member directory",
	},
}

// misconfigVersion: storage/schema/schema.go; the binary is older than the
// data or the cluster.
var misconfigVersion = rule{
	class: ClassMisconfig, reason: "the etcd version does not fit the data or the cluster",
	msgs: []string{"Failed to validate schema"},
	errs: []string{
		"cannot downgrade storage",
		"cannot detect storage schema version",
		"cannot create migration plan",
		"version * is not supported",
	},
}

// misconfigListener: etcdmain/etcd.go "listener failed", embed/etcd.go.
var misconfigListener = rule{
	class: ClassMisconfig, reason: "etcd cannot listen on its addresses",
	msgs: []string{"listener failed", "creating peer listener failed"},
	errs: []string{"address already in use", "cannot assign requested address"},
}

// misconfigTLS: certificate files and TLS settings (embed/etcd.go,
// client/pkg/transport). A missing CA file looks like nothing else.
var misconfigTLS = rule{
	class: ClassMisconfig, reason: "etcd's TLS configuration is broken",
	msgs: []string{
		"failed to get peer self-signed certs",
		"failed to get client self-signed certs",
		"failed to set up TLS",
		"failed to create TLS listener",
	},
	errs: []string{"x509: ", "tls: ", "certificate", "open *.crt", "open *.pem", "open *.key"},
}

// transient: rpctypes/error.go, etcdserver/errors, cluster_util.go. Retry.
var transient = rule{
	class: ClassTransient, reason: "the cluster is temporarily unavailable",
	errs: []string{
		servererrors.ErrNoLeader.Error(),
		servererrors.ErrTimeout.Error(), // prefix of every "request timed out, ..." variant
		servererrors.ErrLeaderChanged.Error(),
		servererrors.ErrTooManyRequests.Error(),
		servererrors.ErrUnhealthy.Error(),
		servererrors.ErrNotEnoughStartedMembers.Error(),
		servererrors.ErrLearnerNotReady.Error(),
		"too many learner members in cluster",
		"could not retrieve cluster information from the given URLs",
		"cannot fetch cluster info from peer urls",
		"context deadline exceeded",
		"connection refused",
		"i/o timeout",
	},
}

// classifyLine lets the error field of a JSON line decide before its msg:
// bootstrap errors all share msg "discovery failed" (etcdmain/etcd.go). A
// line whose first matching rule is not evidence decides nothing.
func classifyLine(l logLine) (Verdict, bool) {
	if !l.json {
		return firstRule(l, func(r rule) bool { return r.matchesErr(l.raw) || r.matchesMsg(l) })
	}
	if l.err != "" {
		if r, ok := findRule(func(r rule) bool { return r.matchesErr(l.err) }); ok {
			return r.decides(l)
		}
	}
	return firstRule(l, func(r rule) bool { return r.matchesMsg(l) })
}

func firstRule(l logLine, match func(rule) bool) (Verdict, bool) {
	r, ok := findRule(match)
	if !ok {
		return Verdict{}, false
	}
	return r.decides(l)
}

func findRule(match func(rule) bool) (rule, bool) {
	for _, r := range rules {
		if match(r) {
			return r, true
		}
	}
	return rule{}, false
}

// decides is r's verdict on l, unless r says l is no evidence.
func (r rule) decides(l logLine) (Verdict, bool) {
	if r.notEvidence {
		return Verdict{}, false
	}
	return r.verdictFor(l), true
}

// verdict reports whether l matches r at all (error field or msg).
func (r rule) verdict(l logLine) (Verdict, bool) {
	ok := r.matchesErr(l.raw) || r.matchesMsg(l)
	if l.json {
		ok = r.matchesErr(l.err) || r.matchesMsg(l)
	}
	if !ok || l.stack {
		return Verdict{}, false
	}
	return r.decides(l)
}

// matchesMsg: a JSON line's msg is compared exactly (and, for a rule that
// blames, its fields must name the logging member); plain text, which has
// no fields, is searched for the msgs of rules that do not blame.
func (r rule) matchesMsg(l logLine) bool {
	if !l.json {
		return r.blame == nil && r.mentionsMsg(l.raw)
	}
	return slices.Contains(r.msgs, l.msg) && (r.blame == nil || r.blame.namesSelf(l.fields))
}

func (r rule) verdictFor(l logLine) Verdict {
	detail := strings.TrimSpace(l.raw)
	if l.json {
		detail = l.msg
		if l.err != "" {
			detail += ": " + l.err
		}
	}
	return Verdict{Class: r.class, Reason: oneLine(r.reason + ": " + detail), Evidence: oneLine(l.raw)}
}

func (r rule) matchesErr(s string) bool {
	if s == "" {
		return false
	}
	return slices.ContainsFunc(r.errs, func(p string) bool { return containsPattern(s, p) })
}

func (r rule) mentionsMsg(s string) bool {
	return slices.ContainsFunc(r.msgs, func(m string) bool { return strings.Contains(s, m) })
}

// containsPattern reports whether s contains pat, where "*" in pat matches
// any text (including none).
func containsPattern(s, pat string) bool {
	for part := range strings.SplitSeq(pat, "*") {
		i := strings.Index(s, part)
		if i < 0 {
			return false
		}
		s = s[i+len(part):]
	}
	return true
}

package repair

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/client/pkg/v3/fileutil"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
	"go.etcd.io/raft/v3/raftpb"
)

// walFacts is what Inspect learns from member/wal.
type walFacts struct {
	snapshotIndex       uint64
	clusterID, memberID uint64
	lastIndex           uint64 // last entry etcd will have, after cutting a torn tail
	term, commit        uint64 // the newest hard state: the raft term and commit index
	torn                string // why the tail is torn; "" if it is not
}

// inspectWAL reads the WAL the way etcd's bootstrap does: pick the newest
// committed snapshot record (wal.ValidSnapshotEntries, as recoverSnapshot
// does), then read every record from it on (wal.Verify, the read-only
// twin of the ReadAll that etcd dies in with "failed to read WAL, cannot be
// repaired").
func inspectWAL(lg *zap.Logger, walDir string) (walFacts, error) {
	var f walFacts
	err := safely("reading the WAL", func() error {
		snaps, err := wal.ValidSnapshotEntries(lg, walDir)
		if err != nil {
			return fmt.Errorf("WAL: reading snapshot records: %w", err)
		}
		start := newestSnapshot(snaps)
		f.snapshotIndex = start.GetIndex()
		hs, err := wal.Verify(lg, walDir, start)
		if err != nil {
			return fmt.Errorf("WAL: verifying from snapshot index %d: %w", start.GetIndex(), err)
		}
		f.term, f.commit = hs.GetTerm(), hs.GetCommit()
		return nil
	})
	if err != nil {
		return f, err
	}
	names, err := walFileNames(walDir)
	if err != nil {
		return f, err
	}
	paths := make([]string, len(names))
	for i, n := range names {
		paths[i] = filepath.Join(walDir, n)
	}
	if f.memberID, f.clusterID, err = readMetadata(paths[len(paths)-1]); err != nil {
		return f, err
	}
	scan := scanWAL(paths)
	f.lastIndex = max(scan.lastIndex, f.snapshotIndex)
	f.torn, err = tornTail(paths, scan)
	return f, err
}

// newestSnapshot: with no committed snapshot record etcd opens the WAL at
// index 0 (bootstrap.go openWALFromSnapshot with an empty walpb.Snapshot).
func newestSnapshot(snaps []*walpb.Snapshot) *walpb.Snapshot {
	if len(snaps) == 0 {
		return &walpb.Snapshot{Index: new(uint64(0)), Term: new(uint64(0))}
	}
	return snaps[len(snaps)-1]
}

// walFileNames lists member/wal/*.wal in order, keeping only names etcd
// parses (storage/wal/util.go checkWALNames ignores the others).
func walFileNames(walDir string) ([]string, error) {
	all, err := fileutil.ReadDir(walDir, fileutil.WithExt(".wal"))
	if err != nil {
		return nil, fmt.Errorf("WAL: listing %s: %w", walDir, err)
	}
	var names []string
	for _, n := range all {
		var seq, index uint64
		if _, err := fmt.Sscanf(n, "%016x-%016x.wal", &seq, &index); err == nil {
			names = append(names, n)
		}
	}
	return names, nil
}

// readMetadata returns the member and cluster ID that etcd writes as the
// metadata record at the start of every WAL file (wal.Create and cut);
// wal.Verify has already checked that all files agree.
func readMetadata(path string) (memberID, clusterID uint64, err error) {
	var data []byte
	_, err = readRecords([]string{path}, func(r *walpb.Record) bool {
		if r.GetType() != wal.MetadataType {
			return true
		}
		data = r.Data
		return false
	})
	if data == nil {
		return 0, 0, fmt.Errorf("WAL: no metadata record in %s: %w", path, err)
	}
	var m etcdserverpb.Metadata
	if err := proto.Unmarshal(data, &m); err != nil {
		return 0, 0, fmt.Errorf("WAL: metadata record in %s: %w", path, err)
	}
	return m.GetNodeID(), m.GetClusterID(), nil
}

// walScan is how far etcd's decoder gets through the WAL files.
type walScan struct {
	err       error  // why it stopped: io.EOF at a clean end
	offset    int64  // end of the last valid record in the file it stopped in
	lastIndex uint64 // index of the last entry record read
}

func scanWAL(paths []string) walScan {
	var s walScan
	s.offset, s.err = readRecords(paths, func(r *walpb.Record) bool {
		if r.GetType() == wal.EntryType {
			var e raftpb.Entry
			if proto.Unmarshal(r.Data, &e) == nil {
				s.lastIndex = e.GetIndex()
			}
		}
		return true
	})
	return s
}

// tornTail tells a torn last record, which etcd cuts off on start, from
// damage it refuses. etcd reads all files until io.EOF; on
// io.ErrUnexpectedEOF it runs wal.Repair, which only truncates the *last*
// file (storage/wal/repair.go), then reads again and gives up
// ("failed to read WAL, cannot be repaired") if the error is still there.
func tornTail(paths []string, all walScan) (string, error) {
	if errors.Is(all.err, io.EOF) {
		return "", nil
	}
	if !errors.Is(all.err, io.ErrUnexpectedEOF) {
		return "", fmt.Errorf("WAL: reading to the end: %w", all.err)
	}
	last := scanWAL(paths[len(paths)-1:])
	if !errors.Is(last.err, io.ErrUnexpectedEOF) {
		return "", fmt.Errorf("WAL: torn record before the last file, which etcd does not repair: %w", all.err)
	}
	return fmt.Sprintf("last WAL record is torn (%v); etcd truncates %s at offset %d on start and keeps the original as .broken",
		last.err, filepath.Base(paths[len(paths)-1]), last.offset), nil
}

// readRecords decodes the files like etcd does, chaining CRCs across files,
// and calls fn for every valid record until fn returns false. It returns the
// error that ended the read (io.EOF at a clean end, nil if fn stopped it)
// and the end offset of the last valid record in the file it stopped in.
func readRecords(paths []string, fn func(*walpb.Record) bool) (int64, error) {
	readers, closeAll, err := openReaders(paths)
	if err != nil {
		return 0, err
	}
	defer closeAll()
	d := wal.NewDecoder(readers...)
	rec := &walpb.Record{}
	for {
		if err := d.Decode(rec); err != nil {
			return d.LastOffset(), err
		}
		if err := chainCRC(d, rec); err != nil {
			return d.LastOffset(), err
		}
		if !fn(rec) {
			return d.LastOffset(), nil
		}
	}
}

// chainCRC: a CRC record starts each file and carries the running CRC of
// the previous one; a fresh decoder (crc 0) accepts it (as wal.Repair does).
func chainCRC(d wal.Decoder, rec *walpb.Record) error {
	if rec.GetType() != wal.CrcType {
		return nil
	}
	if crc := d.LastCRC(); crc != 0 {
		if err := rec.Validate(crc); err != nil {
			return err
		}
	}
	d.UpdateCRC(rec.GetCrc())
	return nil
}

func openReaders(paths []string) ([]fileutil.FileReader, func(), error) {
	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	readers := make([]fileutil.FileReader, 0, len(paths))
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("WAL: %w", err)
		}
		files = append(files, f)
		readers = append(readers, fileutil.NewFileReader(f))
	}
	return readers, closeAll, nil
}

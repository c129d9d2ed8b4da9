package backup

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"filippo.io/age"
	"golang.org/x/sys/unix"

	"github.com/etcdkeeper/etcdkeeper/internal/atomicfile"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

// FormatAge is Encryption.Format of a snapshot encrypted with age.
const FormatAge = "age"

// ageMagic starts every age file (its header's version line).
var ageMagic = []byte("age-encryption.org/v1\n")

// Encryption is what a sidecar records of an encrypted snapshot: the file
// on disk and in S3 is the ciphertext (Sidecar.SHA256 and Size are its),
// and these are the plaintext's and who can read it.
type Encryption struct {
	Format string `json:"format"`
	// Recipients are the age recipients it was encrypted to: any one of
	// their identities reads it.
	Recipients []string `json:"recipients"`
	// PlainSHA256 and PlainSize are the snapshot's before encryption
	// (etcd's stream, its appended sha256 included): a decryption must
	// give exactly these.
	PlainSHA256 string `json:"plainSHA256"`
	PlainSize   int64  `json:"plainSize"`
}

// Keys are what this host holds for its snapshots.
type Keys struct {
	// Recipients: every new snapshot is encrypted to all of them; none:
	// snapshots are plaintext.
	Recipients []age.Recipient
	Names      []string
	// Identities read encrypted snapshots; none: NoIdentity says why
	// (spec.ErrNoIdentity: the file is not on this host; or a refusal).
	Identities []age.Identity
	NoIdentity error
	// Unacknowledged: plaintext without the spec saying so.
	Unacknowledged bool
	// Refused: the spec encrypts but its recipients cannot be read here
	// (KeysFor's error): no snapshot may be taken, plaintext least of all.
	Refused error
}

// KeysFor reads backup.encryption on this host: the recipients, and the
// identities when the identity file is here and only the agent's user can
// read it. A refused identity file does not stop snapshots from being
// taken: only what needs the identity fails, with NoIdentity. A
// recipients file that cannot be read (or is refused) is an error: no
// snapshot is taken in plaintext for want of its keys.
func KeysFor(e spec.Encryption) (Keys, error) {
	var k Keys
	k.Identities, k.NoIdentity = spec.ReadIdentities(e.IdentityFile)
	refused := func(err error) (Keys, error) {
		k.Refused = err
		return k, err
	}
	names := e.Recipients
	if e.RecipientsFile != "" {
		file, err := spec.ReadRecipients(e.RecipientsFile)
		if err != nil {
			return refused(err)
		}
		names = spec.Recipients(e.Recipients, file)
	}
	for _, s := range names {
		r, err := age.ParseX25519Recipient(s)
		if err != nil {
			return refused(fmt.Errorf("backup.encryption.recipients: %q: %w", s, err))
		}
		k.Recipients = append(k.Recipients, r)
	}
	k.Names, k.Unacknowledged = names, e.Unacknowledged()
	return k, nil
}

// KeysToRead is KeysFor for what only reads snapshots (restores, drills,
// the repair's reuse): a recipients file that cannot be read stops new
// snapshots (Keys.Refused), not the reading of those there are.
func KeysToRead(e spec.Encryption) Keys {
	k, _ := KeysFor(e)
	return k
}

// Encrypts: new snapshots are encrypted.
func (k Keys) Encrypts() bool { return len(k.Recipients) > 0 }

// CanRead: this host holds identities to decrypt with.
func (k Keys) CanRead() bool { return len(k.Identities) > 0 }

// Describe says in a few words what the keys do on this host.
func (k Keys) Describe() string {
	var b strings.Builder
	switch {
	case k.Refused != nil:
		fmt.Fprintf(&b, "REFUSED: %v: no snapshot is taken (scheduled, a repair's or a rollout's)", k.Refused)
	case k.Encrypts():
		fmt.Fprintf(&b, "age, %d recipient(s): %s", len(k.Names), strings.Join(ShortKeys(k.Names), ", "))
	case k.Unacknowledged:
		b.WriteString("NONE: plaintext snapshots (the spec gives no backup.encryption)")
	default:
		b.WriteString("none: plaintext snapshots (backup.encryption.plaintext: true)")
	}
	if k.CanRead() {
		fmt.Fprintf(&b, "; identity: %d key(s) on this host", len(k.Identities))
	} else if k.Encrypts() {
		fmt.Fprintf(&b, "; identity: none on this host (%v): restores need it, the ciphertext's sha256 is checked instead", k.NoIdentity)
	}
	return b.String()
}

// ShortKeys abbreviates age recipients for tables: age1 and the first
// and last 6 characters of the key.
func ShortKeys(names []string) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		if len(n) > 20 {
			n = n[:10] + "…" + n[len(n)-6:]
		}
		out = append(out, n)
	}
	return out
}

// Errors of reading an encrypted snapshot.
var (
	// ErrWrongKey means the snapshot is encrypted to none of the
	// identities this host holds.
	ErrWrongKey = errors.New("encrypted to none of this host's identities (wrong key)")
	// ErrNotAge means a file that should be an age-encrypted snapshot is
	// not a valid one: forged, altered or truncated.
	ErrNotAge = errors.New("not a valid age-encrypted snapshot: forged, altered or truncated")
	// ErrChanged means a snapshot file is not the one its sidecar
	// describes (altered, truncated, or another file under its name).
	ErrChanged = errors.New("the file is not the one its sidecar describes")
)

// IsEncrypted: the file at path starts as an age file does.
func IsEncrypted(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, fmt.Errorf("open snapshot: %w", err)
	}
	defer f.Close()
	head := make([]byte, len(ageMagic))
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return false, fmt.Errorf("read snapshot: %w", err)
	}
	return bytes.Equal(head[:n], ageMagic), nil
}

// memFile is an anonymous file in memory (memfd): the plaintext of an
// encrypted snapshot is verified there, so that it never touches a
// filesystem. Only this process (and root) can open it, through its path
// under /proc/self/fd, which bbolt needs.
func memFile(name string) (*os.File, string, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		return nil, "", fmt.Errorf("memfd for the snapshot's plaintext: %w", err)
	}
	f := os.NewFile(uintptr(fd), name)
	return f, fmt.Sprintf("/proc/self/fd/%d", fd), nil
}

// memAvailable is what /proc/meminfo says a new allocation can take
// without swapping (MemAvailable), or -1 when it cannot tell.
func memAvailable() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemAvailable:"); ok {
			var kb int64
			if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%d kB", &kb); err == nil {
				return kb << 10
			}
		}
	}
	return -1
}

// checkMemory refuses to hold a db of dbSize bytes in memory when less
// than that and a quarter more is available: the verification of an
// encrypted snapshot reads its plaintext from memory.
func checkMemory(dbSize int64) error {
	avail := memAvailable()
	if avail < 0 || dbSize <= 0 {
		return nil
	}
	if need := dbSize + dbSize/4; avail < need {
		return fmt.Errorf("an encrypted snapshot is verified in memory: its db is %d MiB, %d MiB available (MemAvailable), at least %d MiB needed: no snapshot taken (free memory, or defragment to shrink the db)",
			dbSize>>20, avail>>20, need>>20)
	}
	return nil
}

// encryptStream streams one snapshot from write (etcd's stream) through
// age, to recipients, into out; it returns the ciphertext's sha256 and
// size, hashed on its way to out.
func encryptStream(write func(io.Writer) (int64, error), out io.Writer, recipients []age.Recipient) (string, int64, error) {
	// etcd's stream comes in pieces of 32 KiB or so: written on in chunks.
	return encryptTo(out, recipients, func(aw io.Writer) error {
		in := bufio.NewWriterSize(aw, chunk)
		_, err := write(in)
		if err == nil {
			err = in.Flush()
		}
		return err
	})
}

// encryptedFile is what encryptMem wrote: the ciphertext's sha256 and
// size.
type encryptedFile struct {
	sum  string
	size int64
	err  error
}

// errStopped: encryptMem was told to stop (the plaintext failed its check).
var errStopped = errors.New("encryption stopped: the snapshot failed its check")

// memTail is a memFile being written: how much is written is published,
// so that encryptMem can follow behind the writer.
type memTail struct {
	f    *os.File
	more chan struct{} // a write or the end since the reader last looked
	mu   sync.Mutex
	n    int64
	done bool
	err  error
}

func newMemTail(f *os.File) *memTail { return &memTail{f: f, more: make(chan struct{}, 1)} }

func (m *memTail) Write(p []byte) (int, error) {
	n, err := m.f.Write(p)
	m.mu.Lock()
	m.n += int64(n)
	m.mu.Unlock()
	m.poke()
	return n, err
}

// end says the writing is over: err is why it failed (nil: the file is
// whole).
func (m *memTail) end(err error) {
	m.mu.Lock()
	m.done, m.err = true, err
	m.mu.Unlock()
	m.poke()
}

func (m *memTail) poke() {
	select {
	case m.more <- struct{}{}:
	default:
	}
}

// next waits until more than off bytes are written, the writing ended,
// or stop is closed. It returns how much is written and whether that is
// all; an error when the writing failed or the reader was stopped.
func (m *memTail) next(off int64, stop <-chan struct{}) (int64, bool, error) {
	for {
		m.mu.Lock()
		n, done, err := m.n, m.done, m.err
		m.mu.Unlock()
		switch {
		case err != nil:
			return n, done, err
		case n > off || done:
			return n, done, nil
		}
		select {
		case <-m.more:
		case <-stop:
			return n, done, errStopped
		}
	}
}

// encryptMem encrypts the plaintext written into tail to recipients,
// into out, following behind the writer, until the writing is over or
// stop is closed. It starts with the first chunk written, so that the
// stream never waits on it and what it has left when the stream ends
// runs beside the check. It reads the memfd where it lies, mapped (no
// copy out of it), up to mapped bytes (the db's size and more: address
// space, not memory), and with pread beyond.
func encryptMem(tail *memTail, mapped int64, out io.Writer, recipients []age.Recipient, stop <-chan struct{}) (e encryptedFile) {
	var view []byte
	if mapped > 0 {
		if m, err := unix.Mmap(int(tail.f.Fd()), 0, int(mapped), unix.PROT_READ, unix.MAP_SHARED); err == nil {
			defer unix.Munmap(m)
			view = m
			// Only what is written is read; should the memfd ever be
			// cut short under the mapping, that is an error, not a crash.
			defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
			defer func() {
				if r := recover(); r != nil {
					e = encryptedFile{err: fmt.Errorf("read the snapshot's plaintext in memory: %v", r)}
				}
			}()
		}
	}
	sum, n, err := encryptTo(out, recipients, func(aw io.Writer) error {
		var buf []byte
		var off int64
		for {
			n, done, err := tail.next(off, stop)
			if err != nil {
				return err
			}
			if n == off && done {
				return nil
			}
			select {
			case <-stop:
				return errStopped
			default:
			}
			k := min(n-off, chunk)
			var p []byte
			if off+k <= int64(len(view)) {
				p = view[off : off+k]
			} else {
				if buf == nil {
					buf = make([]byte, chunk)
				}
				m, err := tail.f.ReadAt(buf[:k], off)
				if err != nil {
					return fmt.Errorf("read the snapshot's plaintext in memory: %w", err)
				}
				p = buf[:m]
			}
			if _, err := aw.Write(p); err != nil {
				return err
			}
			off += int64(len(p))
		}
	})
	return encryptedFile{sum: sum, size: n, err: err}
}

// encryptTo runs age, to recipients, over what fill writes into it, and
// the ciphertext into out, hashed on its way; it returns the
// ciphertext's sha256 and size.
func encryptTo(out io.Writer, recipients []age.Recipient, fill func(io.Writer) error) (string, int64, error) {
	h := sha256.New()
	cw := &counter{w: io.MultiWriter(out, h)}
	bw := bufio.NewWriterSize(cw, chunk)
	aw, err := age.Encrypt(bw, recipients...)
	if err != nil {
		return "", 0, fmt.Errorf("encrypt: %w", err)
	}
	if err := fill(aw); err != nil {
		return "", 0, err
	}
	if err := aw.Close(); err != nil {
		return "", 0, fmt.Errorf("encrypt: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return "", 0, fmt.Errorf("write snapshot: %w", err)
	}
	return hexSum(h), cw.n, nil
}

type counter struct {
	w io.Writer
	n int64
}

func (c *counter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// EncryptFile streams write's snapshot, encrypted to recipients, into
// path (0600, fsynced, through a temporary name and a rename, as
// atomicfile does: never half a snapshot at path): the repair's safety
// snapshot when the spec gives recipients. It returns the plaintext's
// size.
func EncryptFile(path string, recipients []age.Recipient, write func(io.Writer) (int64, error)) (int64, error) {
	tmp := path + ".partial"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return 0, fmt.Errorf("snapshot: %w", err)
	}
	var n int64
	counted := func(w io.Writer) (int64, error) {
		var err error
		n, err = write(w)
		return n, err
	}
	_, _, err = encryptStream(counted, f, recipients)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = atomicfile.SyncDir(filepath.Dir(path))
	}
	if err != nil {
		_ = os.Remove(tmp)
		return 0, fmt.Errorf("snapshot %s: %w", path, err)
	}
	return n, nil
}

// NewIdentityFile makes a new age X25519 identity in a new file at path
// (0600, O_EXCL: never over an existing one; fsynced), as age-keygen
// writes it, and returns its recipient.
func NewIdentityFile(path string) (string, error) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		return "", fmt.Errorf("new identity: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("identity file: %w", err)
	}
	r := id.Recipient().String()
	_, err = fmt.Fprintf(f, "# created: %s by etcdkeeper backup keygen\n# public key: %s\n%s\n", time.Now().UTC().Format(time.RFC3339), r, id)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path)
		return "", fmt.Errorf("identity file %s: %w", path, err)
	}
	return r, nil
}

package backup

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"filippo.io/age"

	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

// plainName is the decrypted snapshot a restore reads, inside a 0700
// scratch dir of the restore's own; it is removed with that dir.
const plainName = "snapshot.db"

// Plain makes the snapshot at path ready for etcdutl's restore, which
// needs a plaintext file, and checks it is the file sc (its sidecar, nil
// when it has none) describes:
//
//   - a plaintext snapshot is used where it is: its sha256 must be sc's;
//   - an encrypted one (sc says so, or, without a sidecar, its first
//     bytes) is decrypted with ids into dir/snapshot.db (0600; dir is the
//     restore's scratch dir in memory, memScratch), hashing both sides as
//     it goes: the ciphertext's sha256 must be sc's, the plaintext's sc's
//     PlainSHA256.
//     age authenticates every 64 KiB chunk and the end of the stream, so
//     an altered or truncated file fails even without a sidecar.
//
// Nothing but dir/snapshot.db is written, and it is removed again when
// any check fails. The plaintext is then for etcd's own checks (Verify).
func Plain(path string, sc *Sidecar, ids []age.Identity, noIdentity error, dir string) (string, error) {
	encrypted, err := isEncrypted(path, sc)
	if err != nil {
		return "", err
	}
	if !encrypted {
		if sc != nil {
			if sum, err := fileSHA256(path); err != nil {
				return "", err
			} else if sum != sc.SHA256 {
				return "", fmt.Errorf("%s: %w: its sha256 is %s, its sidecar's %s", filepath.Base(path), ErrChanged, sum, sc.SHA256)
			}
		}
		return path, nil
	}
	// An encrypted one's ciphertext is hashed as it is decrypted (one
	// read), and the plaintext removed again when either sum is not its
	// sidecar's.
	if len(ids) == 0 {
		return "", fmt.Errorf("%s is encrypted: %w", filepath.Base(path), cmpErr(noIdentity, spec.ErrNoIdentity))
	}
	dst := filepath.Join(dir, plainName)
	if err := decryptTo(path, dst, sc, ids); err != nil {
		_ = os.Remove(dst)
		return "", fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	return dst, nil
}

// isEncrypted: sc says the snapshot at path is encrypted, or, without a
// sidecar, its first bytes do.
func isEncrypted(path string, sc *Sidecar) (bool, error) {
	if sc != nil {
		return sc.Encryption != nil, nil
	}
	return IsEncrypted(path)
}

func cmpErr(err, def error) error {
	if err != nil {
		return err
	}
	return def
}

// decryptTo decrypts src into a new file dst (0600, fsynced) and checks
// both sides' sha256 against sc when given.
func decryptTo(src, dst string, sc *Sidecar, ids []age.Identity) error {
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("decrypted snapshot: %w", err)
	}
	defer out.Close()
	if err := decryptInto(src, out, sc, ids); err != nil {
		return err
	}
	if err := out.Sync(); err != nil {
		return fmt.Errorf("decrypted snapshot: %w", err)
	}
	return nil
}

// Decrypts: the encrypted snapshot at path decrypts, in full, with ids to
// exactly the plaintext its sidecar sc records, and is the ciphertext sc
// records. Nothing is written: the plaintext is hashed and dropped. A
// repair reuses a scheduled snapshot only when its own host could
// restore it.
func Decrypts(path string, sc *Sidecar, ids []age.Identity) error {
	if sc == nil || sc.Encryption == nil {
		return fmt.Errorf("%s: %w: its sidecar records no encryption", filepath.Base(path), ErrChanged)
	}
	if err := decryptInto(path, io.Discard, sc, ids); err != nil {
		return fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	return nil
}

// decryptInto decrypts src into w and checks both sides' sha256 (and the
// plaintext's size) against sc when given. age authenticates every 64 KiB
// chunk and the end of the stream: an altered or truncated file fails
// here even without a sidecar.
func decryptInto(src string, w io.Writer, sc *Sidecar, ids []age.Identity) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("open snapshot: %w", err)
	}
	defer in.Close()
	// Three stages: the file and its hash, age (this goroutine), the
	// plaintext's hash and w.
	cipher := sha256.New()
	cr, readDone := readStage(in, cipher)
	read := false
	defer func() {
		if !read {
			cr.Close()
			_ = readDone()
		}
	}()
	r, err := age.Decrypt(cr, ids...)
	if err != nil {
		if _, ok := errors.AsType[*age.NoIdentityMatchError](err); ok {
			return fmt.Errorf("%w: it is for other recipients%s", ErrWrongKey, recipientsOf(sc))
		}
		return fmt.Errorf("%w: %w", ErrNotAge, err)
	}
	plain := sha256.New()
	var n int64
	sink := startStage(func(pr io.Reader) error {
		var err error
		n, err = copyChunks(io.MultiWriter(w, plain), pr)
		if err != nil {
			return fmt.Errorf("decrypted snapshot: %w", err)
		}
		return nil
	})
	ar := &errReader{r: r}
	_, err = copyChunks(sink, ar)
	if err = sink.finish(err); ar.err != nil {
		return fmt.Errorf("%w: %w", ErrNotAge, ar.err)
	} else if err != nil {
		return err
	}
	// What age did not need (nothing, in a good file) is hashed too.
	if _, err := io.Copy(io.Discard, cr); err != nil {
		return fmt.Errorf("read snapshot: %w", err)
	}
	read = true
	if err := readDone(); err != nil {
		return fmt.Errorf("read snapshot: %w", err)
	}
	if sc == nil {
		return nil
	}
	if got := hexSum(cipher); got != sc.SHA256 {
		return fmt.Errorf("%w: its sha256 is %s, the sidecar's %s", ErrChanged, got, sc.SHA256)
	}
	if e := sc.Encryption; e == nil || hexSum(plain) != e.PlainSHA256 || n != e.PlainSize {
		want := "none recorded"
		if e != nil {
			want = fmt.Sprintf("%s, %d bytes", e.PlainSHA256, e.PlainSize)
		}
		return fmt.Errorf("%w: it decrypts to %s, %d bytes; the sidecar records %s", ErrChanged, hexSum(plain), n, want)
	}
	return nil
}

func recipientsOf(sc *Sidecar) string {
	if sc == nil || sc.Encryption == nil {
		return ""
	}
	return fmt.Sprintf(" (its sidecar says %v)", ShortKeys(sc.Encryption.Recipients))
}

// sidecarOf reads the sidecar next to a snapshot given by path (nil when
// there is none: a snapshot copied by hand, or a repair's safety
// snapshot). One that is there but cannot be read is an error: it may be
// the record that the file was changed.
func sidecarOf(path string) (*Sidecar, error) {
	sc, err := readSidecar(SidecarName(path))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w (move it away to restore %s without it)", err, filepath.Base(path))
	}
	if sc.File != "" && sc.File != filepath.Base(path) {
		return nil, fmt.Errorf("%w: the sidecar %s names %s", ErrChanged, filepath.Base(SidecarName(path)), sc.File)
	}
	return sc, nil
}

// Restorable is a snapshot checked in full for a restore that changes
// something (ForRestore).
type Restorable struct {
	// Path is the plaintext etcdutl's restore reads: the snapshot itself
	// when it is plaintext, else its decryption in memory.
	Path string
	mem  string // the scratch dir in memDir holding Path
}

// Close removes the decrypted plaintext from memory (nothing for a
// plaintext snapshot). Restores call it as soon as they have read it.
func (r Restorable) Close() {
	if r.mem != "" {
		removeMem(r.mem)
	}
}

// ForRestore makes the snapshot at path (any file: a scheduled one, one
// saved by hand, a repair's safety snapshot, one downloaded from S3) ready
// for a restore that changes something: its sidecar, when one lies next
// to it, must describe it (Plain); an encrypted one is decrypted with k
// into memory (memScratch: never onto a disk; refused, with why, when it
// does not fit); then etcdutl's checks (Verify) must pass and, with a
// sidecar, find what it recorded. The caller closes what it returns.
func ForRestore(path string, k Keys) (Restorable, error) {
	sc, err := sidecarOf(path)
	if err != nil {
		return Restorable{}, err
	}
	r, err := decryptForRestore(path, sc, k)
	if err != nil {
		return Restorable{}, err
	}
	v, _, _, err := Verify(r.Path)
	if err != nil {
		r.Close()
		return Restorable{}, fmt.Errorf("%s does not verify: %w", filepath.Base(path), err)
	}
	if sc != nil && (v.Revision != sc.Verification.Revision || v.TotalKey != sc.Verification.TotalKey || v.Hash != sc.Verification.Hash) {
		r.Close()
		return Restorable{}, fmt.Errorf("%s: %w: it holds revision %d, %d keys; the sidecar records revision %d, %d keys",
			filepath.Base(path), ErrChanged, v.Revision, v.TotalKey, sc.Verification.Revision, sc.Verification.TotalKey)
	}
	return r, nil
}

// decryptForRestore is Plain with, for an encrypted snapshot, a scratch
// dir in memory for its plaintext.
func decryptForRestore(path string, sc *Sidecar, k Keys) (Restorable, error) {
	enc, err := isEncrypted(path, sc)
	if err != nil {
		return Restorable{}, err
	}
	mem := ""
	if enc && k.CanRead() {
		if mem, err = memScratch(plainBound(path, sc)); err != nil {
			return Restorable{}, noRoom(path, err)
		}
	}
	plain, err := Plain(path, sc, k.Identities, k.NoIdentity, mem)
	if err != nil {
		removeMem(mem)
		return Restorable{}, err
	}
	return Restorable{Path: plain, mem: mem}, nil
}

// plainBound is the plaintext's size its sidecar records, or, without
// one, the ciphertext's (age adds to it: more than the plaintext).
func plainBound(path string, sc *Sidecar) int64 {
	if sc != nil && sc.Encryption != nil {
		return sc.Encryption.PlainSize
	}
	if fi, err := os.Stat(path); err == nil {
		return fi.Size()
	}
	return 0
}

// noRoom is the refusal of a restore whose plaintext does not fit in
// memory, with what to do.
func noRoom(path string, err error) error {
	return fmt.Errorf("%s is encrypted, and its plaintext is decrypted into memory only, never onto a disk: %w "+
		"(make room: free memory, or a larger %s with mount -o remount,size=... %s; or restore on a host with more memory)",
		filepath.Base(path), err, memDir, memDir)
}

// Precheck is what a command can check of the snapshot at path before it
// asks an agent to restore it (the agent checks it in full, ForRestore,
// before it changes anything): a plaintext one verifies; an encrypted one
// is the file its sidecar describes (when it has one), and, when the
// command can read the identity file, is for one of its keys.
func Precheck(path string, k Keys) error {
	sc, err := sidecarOf(path)
	if err != nil {
		return err
	}
	enc, err := IsEncrypted(path)
	if err != nil {
		return err
	}
	if sc != nil {
		if sum, err := wholeSHA256(path); err != nil {
			return err
		} else if sum != sc.SHA256 {
			return fmt.Errorf("%s: %w: its sha256 is %s, its sidecar's %s", filepath.Base(path), ErrChanged, sum, sc.SHA256)
		}
		if enc != (sc.Encryption != nil) {
			return fmt.Errorf("%s: %w: encrypted %v, the sidecar says %v", filepath.Base(path), ErrChanged, enc, sc.Encryption != nil)
		}
	}
	if !enc {
		_, _, _, err := Verify(path)
		return err
	}
	if k.CanRead() {
		// The agent's restore decrypts it into memory: there must be room.
		if err := memRoom(plainBound(path, sc)); err != nil {
			return noRoom(path, err)
		}
		// Decrypted in full and dropped: the stream authenticates, and
		// with a sidecar, is the plaintext it records.
		if err := decryptInto(path, io.Discard, sc, k.Identities); err != nil {
			return fmt.Errorf("%s: %w", filepath.Base(path), err)
		}
	}
	return nil
}

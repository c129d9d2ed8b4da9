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
// any check fails. The plaintext is then for etcd's own checks: a
// decrypted one was hashed as it was written (sums, for verifySummed; nil
// for a plaintext snapshot used where it is).
func Plain(path string, sc *Sidecar, ids []age.Identity, noIdentity error, dir string) (string, *summed, error) {
	encrypted, err := isEncrypted(path, sc)
	if err != nil {
		return "", nil, err
	}
	if !encrypted {
		if sc != nil {
			if sum, err := fileSHA256(path); err != nil {
				return "", nil, err
			} else if sum != sc.SHA256 {
				return "", nil, fmt.Errorf("%s: %w: its sha256 is %s, its sidecar's %s", filepath.Base(path), ErrChanged, sum, sc.SHA256)
			}
		}
		return path, nil, nil
	}
	// An encrypted one's ciphertext is hashed as it is decrypted (one
	// read), and the plaintext removed again when either sum is not its
	// sidecar's.
	if len(ids) == 0 {
		return "", nil, fmt.Errorf("%s is encrypted: %w", filepath.Base(path), cmpErr(noIdentity, spec.ErrNoIdentity))
	}
	in, err := os.Open(path)
	if err != nil {
		return "", nil, fmt.Errorf("open snapshot: %w", err)
	}
	defer in.Close()
	dst := filepath.Join(dir, plainName)
	sums, err := decryptTo(in, dst, sc, ids)
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	return dst, &sums, nil
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

// decryptTo decrypts the ciphertext read from in into a new file dst
// (0600; in memory, memScratch: no sync) and checks both sides' sha256
// against sc when given (decryptStream). dst is removed again when
// anything fails: the plaintext of a stream that did not check out is
// never left, nor used.
func decryptTo(in io.Reader, dst string, sc *Sidecar, ids []age.Identity) (summed, error) {
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return summed{}, fmt.Errorf("decrypted snapshot: %w", err)
	}
	sums, err := decryptStream(in, out, sc, ids)
	if cerr := out.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("decrypted snapshot: %w", cerr)
	}
	if err != nil {
		_ = os.Remove(dst)
		return summed{}, err
	}
	return sums, nil
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
	if err := decryptFile(path, io.Discard, sc, ids); err != nil {
		return fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	return nil
}

// decryptFile decrypts the file src into w (decryptStream).
func decryptFile(src string, w io.Writer, sc *Sidecar, ids []age.Identity) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("open snapshot: %w", err)
	}
	defer in.Close()
	_, err = decryptStream(in, w, sc, ids)
	return err
}

// decryptStream decrypts the ciphertext read from in (a file, or an
// object as it downloads) into w, and checks both sides' sha256 (and the
// plaintext's size) against sc when given; it returns the plaintext's
// sums (streamSums). age authenticates every 64 KiB chunk and the end of
// the stream: an altered or truncated file fails here even without a
// sidecar.
//
// The order is the point: w has the whole plaintext before the
// ciphertext's sha256 is known, so nothing may trust w until this
// returns nil; the callers write it only into a scratch dir in memory
// and remove it on any error.
func decryptStream(in io.Reader, w io.Writer, sc *Sidecar, ids []age.Identity) (summed, error) {
	// Three stages: in and its hash, age (this goroutine), the
	// plaintext's sums and w.
	cipher := sha256.New()
	cr, readDone := readStage(in, cipher)
	read := false
	// finishRead stops the reading stage and returns its own error: in
	// failed (a download cut off), rather than what age made of it.
	finishRead := func() error {
		read = true
		cr.Close()
		if err := readDone(); err != nil && !errors.Is(err, io.ErrClosedPipe) {
			return fmt.Errorf("read snapshot: %w", err)
		}
		return nil
	}
	defer func() {
		if !read {
			_ = finishRead()
		}
	}()
	r, err := age.Decrypt(cr, ids...)
	if err != nil {
		if rerr := finishRead(); rerr != nil {
			return summed{}, rerr
		}
		if _, ok := errors.AsType[*age.NoIdentityMatchError](err); ok {
			return summed{}, fmt.Errorf("%w: it is for other recipients%s", ErrWrongKey, recipientsOf(sc))
		}
		return summed{}, fmt.Errorf("%w: %w", ErrNotAge, err)
	}
	plain := newStreamSums()
	sink := startStage(func(pr io.Reader) error {
		if _, err := copyChunks(io.MultiWriter(w, plain), pr); err != nil {
			return fmt.Errorf("decrypted snapshot: %w", err)
		}
		return nil
	})
	ar := &errReader{r: r}
	_, err = copyChunks(sink, ar)
	if err = sink.finish(err); ar.err != nil {
		if rerr := finishRead(); rerr != nil {
			return summed{}, rerr
		}
		return summed{}, fmt.Errorf("%w: %w", ErrNotAge, ar.err)
	} else if err != nil {
		return summed{}, err
	}
	// What age did not need (nothing, in a good file) is hashed too.
	if _, err := io.Copy(io.Discard, cr); err != nil {
		return summed{}, fmt.Errorf("read snapshot: %w", err)
	}
	if err := finishRead(); err != nil {
		return summed{}, err
	}
	// sumErr: the plaintext's own trailer (etcd's sha256 of the db) does
	// not match; said after the sidecar's sums, which say more.
	sums, sumErr := plain.result()
	if sc == nil {
		return sums, sumErr
	}
	if got := hexSum(cipher); got != sc.SHA256 {
		return summed{}, fmt.Errorf("%w: its sha256 is %s, the sidecar's %s", ErrChanged, got, sc.SHA256)
	}
	if e := sc.Encryption; e == nil || sums.SHA256 != e.PlainSHA256 || sums.Size != e.PlainSize {
		want := "none recorded"
		if e != nil {
			want = fmt.Sprintf("%s, %d bytes", e.PlainSHA256, e.PlainSize)
		}
		return summed{}, fmt.Errorf("%w: it decrypts to %s, %d bytes; the sidecar records %s", ErrChanged, sums.SHA256, sums.Size, want)
	}
	return sums, sumErr
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
	mem  string  // the scratch dir in memDir holding Path
	sums *summed // Path's, taken as it was decrypted (nil: plaintext)
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
	var v Verification
	if r.sums != nil {
		v, _, _, err = verifySummed(r.Path, *r.sums, nil)
	} else {
		v, _, _, err = Verify(r.Path)
	}
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
	plain, sums, err := Plain(path, sc, k.Identities, k.NoIdentity, mem)
	if err != nil {
		removeMem(mem)
		return Restorable{}, err
	}
	return Restorable{Path: plain, mem: mem, sums: sums}, nil
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
		if err := decryptFile(path, io.Discard, sc, k.Identities); err != nil {
			return fmt.Errorf("%s: %w", filepath.Base(path), err)
		}
	}
	return nil
}

package backup

import (
	"bufio"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
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
//     restore's scratch dir, 0700), hashing both sides as it goes: the
//     ciphertext's sha256 must be sc's, the plaintext's sc's PlainSHA256.
//     age authenticates every 64 KiB chunk and the end of the stream, so
//     an altered or truncated file fails even without a sidecar.
//
// Nothing but dir/snapshot.db is written, and it is removed again when
// any check fails. The plaintext is then for etcd's own checks (Verify).
func Plain(path string, sc *Sidecar, ids []age.Identity, noIdentity error, dir string) (string, error) {
	encrypted := sc != nil && sc.Encryption != nil
	if sc == nil {
		var err error
		if encrypted, err = IsEncrypted(path); err != nil {
			return "", err
		}
	}
	if sc != nil {
		if sum, err := fileSHA256(path); err != nil {
			return "", err
		} else if sum != sc.SHA256 {
			return "", fmt.Errorf("%s: %w: its sha256 is %s, its sidecar's %s", filepath.Base(path), ErrChanged, sum, sc.SHA256)
		}
	}
	if !encrypted {
		return path, nil
	}
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

func cmpErr(err, def error) error {
	if err != nil {
		return err
	}
	return def
}

// decryptTo decrypts src into a new file dst (0600, fsynced) and checks
// both sides' sha256 against sc when given.
func decryptTo(src, dst string, sc *Sidecar, ids []age.Identity) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("open snapshot: %w", err)
	}
	defer in.Close()
	cipher := sha256.New()
	tee := io.TeeReader(bufio.NewReaderSize(in, 1<<20), cipher)
	r, err := age.Decrypt(tee, ids...)
	if err != nil {
		if _, ok := errors.AsType[*age.NoIdentityMatchError](err); ok {
			return fmt.Errorf("%w: it is for other recipients%s", ErrWrongKey, recipientsOf(sc))
		}
		return fmt.Errorf("%w: %w", ErrNotAge, err)
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("decrypted snapshot: %w", err)
	}
	defer out.Close()
	plain := sha256.New()
	bw := bufio.NewWriterSize(io.MultiWriter(out, plain), 1<<20)
	n, err := io.Copy(bw, r)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNotAge, err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("decrypted snapshot: %w", err)
	}
	// What age did not need (nothing, in a good file) is hashed too.
	if _, err := io.Copy(io.Discard, tee); err != nil {
		return fmt.Errorf("read snapshot: %w", err)
	}
	if err := out.Sync(); err != nil {
		return fmt.Errorf("decrypted snapshot: %w", err)
	}
	if sc == nil {
		return nil
	}
	if got := hexSum(cipher); got != sc.SHA256 {
		return fmt.Errorf("%w: its sha256 changed while it was read (%s, the sidecar's %s)", ErrChanged, got, sc.SHA256)
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
	return fmt.Sprintf(" (its sidecar says %v)", shortKeys(sc.Encryption.Recipients))
}

// Readable: the encrypted snapshot at path has a header one of ids
// opens (read from the header alone: cheap). A repair reuses a scheduled
// snapshot only when its own host could restore it.
func Readable(path string, ids []age.Identity) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open snapshot: %w", err)
	}
	defer f.Close()
	if _, err := age.Decrypt(bufio.NewReader(f), ids...); err != nil {
		if _, ok := errors.AsType[*age.NoIdentityMatchError](err); ok {
			return fmt.Errorf("%s: %w", filepath.Base(path), ErrWrongKey)
		}
		return fmt.Errorf("%s: %w: %w", filepath.Base(path), ErrNotAge, err)
	}
	return nil
}

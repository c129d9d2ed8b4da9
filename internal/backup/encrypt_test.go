package backup

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	"github.com/minio/minio-go/v7"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkeeper/etcdkeeper/internal/spec"
	"github.com/etcdkeeper/etcdkeeper/internal/testetcd"
)

// testKey is an age key pair and its identity file (0600).
type testKey struct {
	id   *age.X25519Identity
	name string // the recipient, age1...
	file string
}

func newKey(t *testing.T) testKey {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "backup.key")
	if err := os.WriteFile(file, []byte("# test key\n"+id.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return testKey{id: id, name: id.Recipient().String(), file: file}
}

// keysOf are the Keys of a spec with these recipients and this identity
// file ("" for none on this host).
func keysOf(t *testing.T, identityFile string, recipients ...testKey) Keys {
	t.Helper()
	var names []string
	for _, r := range recipients {
		names = append(names, r.name)
	}
	if identityFile == "" {
		identityFile = filepath.Join(t.TempDir(), "absent.key")
	}
	k, err := KeysFor(spec.Encryption{Recipients: names, IdentityFile: identityFile})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// putSecret writes a known, random secret value into the cluster and
// returns it.
func putSecret(t *testing.T, ep string) []byte {
	t.Helper()
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	secret := "etcdkeeper-test-secret-" + hex.EncodeToString(b)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, "/registry/secrets/default/db-password", secret); err != nil {
		t.Fatal(err)
	}
	return []byte(secret)
}

func take(t *testing.T, ep, dir string, k Keys) Entry {
	t.Helper()
	e, err := (&Taker{Client: dial(t, ep), Cluster: "c1", Member: "a", Dir: dir, By: BySchedule, Keys: k}).Take(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestEncryptedSnapshot takes an encrypted snapshot of a real etcd that
// holds a secret: the file is age's, holds no byte of the secret, and its
// sidecar records both sides' sha256 and the recipients; it restores with
// either recipient's identity, a host without one checks its ciphertext's
// sha256, and the drill restores it and reports each step.
func TestEncryptedSnapshot(t *testing.T) {
	ep, _ := testetcd.Start(t)
	live, rev := fill(t, ep, 500, 200)
	secret := putSecret(t, ep)
	rev++
	live++
	a, b := newKey(t), newKey(t)
	dir := filepath.Join(t.TempDir(), "backups")
	e := take(t, ep, dir, keysOf(t, "", a, b))
	sc := e.Sidecar
	data, err := os.ReadFile(e.Path())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(data, ageMagic) || bytes.Contains(data, secret) {
		t.Fatalf("the snapshot file is not age ciphertext, or holds the secret")
	}
	if sum := sha256.Sum256(data); sc.SHA256 != hex.EncodeToString(sum[:]) || sc.Size != int64(len(data)) {
		t.Errorf("sidecar sha256/size %s/%d are not the file's", sc.SHA256, sc.Size)
	}
	if enc := sc.Encryption; enc == nil || enc.Format != FormatAge || !slices.Equal(enc.Recipients, []string{a.name, b.name}) || enc.PlainSize <= 0 || enc.PlainSHA256 == "" {
		t.Fatalf("sidecar encryption = %+v", sc.Encryption)
	}
	if v := sc.Verification; v.Revision != rev || v.TotalKey != live || v.Integrity != "ok" {
		t.Errorf("verification = %+v, want revision %d, %d keys, integrity ok (verified in memory)", v, rev, live)
	}
	for _, f := range dirNames(t, dir) {
		b, _ := os.ReadFile(filepath.Join(dir, f))
		if bytes.Contains(b, secret) {
			t.Errorf("%s holds the secret", f)
		}
	}
	// The plaintext decrypts to exactly what the sidecar recorded.
	r, err := age.Decrypt(bytes.NewReader(data), b.id)
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := io.ReadAll(r)
	if sum := sha256.Sum256(plain); hex.EncodeToString(sum[:]) != sc.Encryption.PlainSHA256 || !bytes.Contains(plain, secret) {
		t.Errorf("the plaintext is not the one the sidecar records, or lacks the secret")
	}

	listed, err := List(dir, "c1")
	if err != nil || len(listed) != 1 {
		t.Fatal(listed, err)
	}
	for _, key := range []testKey{a, b} {
		rc := CheckRestore(context.Background(), listed[0], keysOf(t, key.file, a, b))
		if !rc.OK || rc.Checked != CheckedRestore || rc.Revision != rev || rc.Keys != int64(live) {
			t.Errorf("restore check with one recipient's identity = %+v", rc)
		}
	}
	if rc := CheckRestore(context.Background(), listed[0], keysOf(t, "", a, b)); !rc.OK || rc.Checked != CheckedSHA256 {
		t.Errorf("restore check without an identity = %+v, want its ciphertext sha256 checked", rc)
	}
	d := RunDrill(context.Background(), DrillPlan{Cluster: "c1", ClusterID: e.ClusterID(), Dir: dir, Keys: keysOf(t, a.file, a, b)})
	if !d.OK || !d.Encrypted || d.Bytes != sc.Encryption.PlainSize || d.Revision != rev || d.Steps.Decrypt <= 0 || d.Steps.Restore <= 0 || d.Source != e.Path() {
		t.Errorf("drill = %+v", d)
	}
	t.Logf("drill: %s", d.Line())
	if names := dirNames(t, dir); len(names) != 3 {
		t.Errorf("scratch dirs left: %q", names)
	}
}

// TestKeyRotation: a recipient added takes effect at the next snapshot;
// the older one stays readable with the old key, and the new key alone
// reads only the new one.
func TestKeyRotation(t *testing.T) {
	ep, _ := testetcd.Start(t)
	fill(t, ep, 50, 100)
	old, added := newKey(t), newKey(t)
	dir := filepath.Join(t.TempDir(), "backups")
	first := take(t, ep, dir, keysOf(t, "", old))
	time.Sleep(time.Second) // another name
	second := take(t, ep, dir, keysOf(t, "", old, added))
	if !slices.Equal(first.Sidecar.Encryption.Recipients, []string{old.name}) || !slices.Equal(second.Sidecar.Encryption.Recipients, []string{old.name, added.name}) {
		t.Fatalf("recipients: %v, then %v", first.Sidecar.Encryption.Recipients, second.Sidecar.Encryption.Recipients)
	}
	for _, tt := range []struct {
		e    Entry
		key  testKey
		want error // nil: it restores
	}{
		{first, old, nil},
		{second, old, nil},
		{second, added, nil},
		{first, added, ErrWrongKey},
	} {
		r, err := ForRestore(tt.e.Path(), keysOf(t, tt.key.file, old, added))
		r.Close()
		if !errors.Is(err, tt.want) {
			t.Errorf("%s with %s: %v, want %v", tt.e.File, tt.key.name[:12], err, tt.want)
		}
	}
}

// TestRefusedByEveryRestorePath: a snapshot that is not the one its
// sidecar describes, or that this host's key cannot read, is refused by
// every path that restores or reuses one, each on its own, with the
// reason each case names; none of them changes the file or leaves a
// decrypted copy, on a disk or in memory. The drill from S3 decrypts as
// it downloads: the plaintext is in memory before the ciphertext's sha256
// is known, and must be gone when that refuses it. docs/backups.md's
// table is this test's.
func TestRefusedByEveryRestorePath(t *testing.T) {
	ep, _ := testetcd.Start(t)
	fill(t, ep, 200, 100)
	ours, other := newKey(t), newKey(t)
	k := keysOf(t, ours.file, ours)
	src := filepath.Join(t.TempDir(), "src")
	good := take(t, ep, src, k)
	putSecret(t, ep) // the next snapshot holds other data
	time.Sleep(time.Second)
	next := take(t, ep, src, k)
	goodData, _ := os.ReadFile(good.Path())
	nextData, _ := os.ReadFile(next.Path())
	reencrypted := reencrypt(t, goodData, ours.id, other.id.Recipient())
	s3cfg := startS3(t)
	uploads := 0

	sum := func(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
	// What each refusal says: its error's text (ErrChanged, ErrNotAge,
	// ErrWrongKey), or that the choice of a snapshot passed it over
	// (the drill: "no verified snapshot"; the repair streams a fresh one).
	const (
		changed  = "is not the one its sidecar describes"
		notAge   = "not a valid age-encrypted snapshot"
		wrongKey = "(wrong key)"
		passed   = "passed over"
	)
	all := func(why string) [6]string { return [6]string{why, why, why, why, why, why} }
	cases := []struct {
		name string
		// file is what lies under the good snapshot's name; sidecar
		// edits its sidecar; keys, when set, are this host's instead.
		file    []byte
		sidecar func(sc *Sidecar)
		keys    *Keys
		// why each path (in the order of paths below) refuses it.
		why [6]string
	}{
		{"truncated", goodData[:len(goodData)/2], nil, nil, [6]string{notAge, passed, changed, notAge, passed, notAge}},
		{"one byte altered", flip(goodData), nil, nil, [6]string{notAge, passed, changed, notAge, passed, notAge}},
		{"truncated, sidecar's sha256 updated", goodData[:len(goodData)-100], func(sc *Sidecar) { sc.SHA256, sc.Size = sum(goodData[:len(goodData)-100]), int64(len(goodData)-100) }, nil, all(notAge)},
		{"forged: another snapshot to our key, sidecar's sha256 updated", nextData, func(sc *Sidecar) { sc.SHA256, sc.Size = next.Sidecar.SHA256, next.Size }, nil, all(changed)},
		{"re-encrypted to another key, sidecar's sha256 updated", reencrypted, func(sc *Sidecar) { sc.SHA256, sc.Size = sum(reencrypted), int64(len(reencrypted)) }, nil, all(wrongKey)},
		{"sidecar swapped (another snapshot's, renamed)", goodData, func(sc *Sidecar) { *sc = *next.Sidecar; sc.File = good.File }, nil, [6]string{changed, passed, changed, changed, passed, changed}},
		{"sidecar's plaintext sha256 altered", goodData, func(sc *Sidecar) { sc.Encryption.PlainSHA256 = sum([]byte("x")) }, nil, all(changed)},
		{"wrong key: the file intact, this host's identity another key", goodData, nil, new(keysOf(t, other.file, ours)), all(wrongKey)},
	}
	paths := []struct {
		name string
		// refuse returns nil when the path would restore (or reuse) the
		// snapshot in dir with keys k.
		refuse func(dir string, k Keys) error
	}{
		{"restore check", func(dir string, k Keys) error {
			es, _ := List(dir, "c1")
			if len(es) != 1 {
				return errors.New("not listed")
			}
			if rc := CheckRestore(context.Background(), es[0], k); !rc.OK {
				return errors.New(rc.Error)
			}
			return nil
		}},
		{"restore drill", func(dir string, k Keys) error {
			if d := RunDrill(context.Background(), DrillPlan{Cluster: "c1", ClusterID: good.ClusterID(), Dir: dir, Keys: k}); !d.OK {
				return errors.New(d.Error)
			}
			return nil
		}},
		{"recover --from-snapshot: the command's check", func(dir string, k Keys) error {
			return Precheck(filepath.Join(dir, good.File), k)
		}},
		{"recover --from-snapshot: the agent's check", func(dir string, k Keys) error {
			r, err := ForRestore(filepath.Join(dir, good.File), k)
			r.Close()
			return err
		}},
		{"repair reuse", func(dir string, k Keys) error {
			es, _ := List(dir, "c1")
			e, ok := NewestVerified(es, good.ClusterID())
			if !ok {
				// Not chosen: the repair streams a fresh safety snapshot.
				return fmt.Errorf("passed over (not intact): %w", ErrChanged)
			}
			return Decrypts(e.Path(), e.Sidecar, k.Identities)
		}},
		{"restore drill from S3 (decrypted as it downloads)", func(dir string, k Keys) error {
			// The file and its sidecar go up as they lie in dir, under a
			// prefix of their own.
			uploads++
			cfg := s3cfg
			cfg.Prefix = fmt.Sprintf("refused-%d/", uploads)
			putFile(t, cfg, good.File, filepath.Join(dir, good.File))
			putFile(t, cfg, SidecarName(good.File), filepath.Join(dir, SidecarName(good.File)))
			d := RunDrill(context.Background(), DrillPlan{Cluster: "c1", ClusterID: good.ClusterID(), Dir: dir, S3: cfg, Keys: k})
			if !d.OK {
				return errors.New(d.Error)
			}
			if !strings.HasPrefix(d.Source, "s3://") || !d.Steps.Streamed {
				return fmt.Errorf("drilled %s, streamed %v: not the bucket's in one pass", d.Source, d.Steps.Streamed)
			}
			return nil
		}},
	}
	ownMem := filepath.Join(memDir, memPrefix+strconv.Itoa(os.Getpid())+"-*")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			keys := k
			if c.keys != nil {
				keys = *c.keys
			}
			for i, p := range paths {
				dir := filepath.Join(t.TempDir(), "backups")
				if err := os.Mkdir(dir, 0o700); err != nil {
					t.Fatal(err)
				}
				writeFile(t, filepath.Join(dir, good.File), c.file)
				sc := *good.Sidecar
				enc := *sc.Encryption
				sc.Encryption = &enc
				if c.sidecar != nil {
					c.sidecar(&sc)
				}
				if err := writeSidecar(filepath.Join(dir, SidecarName(good.File)), &sc); err != nil {
					t.Fatal(err)
				}
				before := dirNames(t, dir)
				err := p.refuse(dir, keys)
				switch {
				case err == nil:
					t.Errorf("%s: not refused", p.name)
				case !strings.Contains(err.Error(), c.why[i]):
					t.Errorf("%s: refused with %q, want it to say %q", p.name, err, c.why[i])
				default:
					t.Logf("%s: refused: %v", p.name, err)
				}
				after, _ := os.ReadFile(filepath.Join(dir, good.File))
				if !bytes.Equal(after, c.file) {
					t.Errorf("%s changed the snapshot", p.name)
				}
				for _, n := range dirNames(t, dir) {
					if !slices.Contains(before, n) && !strings.HasSuffix(n, sumSuffix) {
						t.Errorf("%s left %s", p.name, n)
					}
				}
				if left, _ := filepath.Glob(ownMem); len(left) > 0 {
					t.Errorf("%s left %v in memory", p.name, left)
				}
			}
		})
	}
	// And the good one passes every path (so that each can fail).
	dir := filepath.Join(t.TempDir(), "backups")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, good.File), goodData)
	if err := writeSidecar(filepath.Join(dir, SidecarName(good.File)), good.Sidecar); err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		if err := p.refuse(dir, k); err != nil {
			t.Errorf("%s refused the good snapshot: %v", p.name, err)
		}
	}
}

// putFile puts the file at path into cfg's bucket as cfg.Prefix+name.
func putFile(t *testing.T, cfg spec.S3, name, path string) {
	t.Helper()
	client, err := s3Client(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.FPutObject(context.Background(), cfg.Bucket, cfg.Prefix+name, path, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
}

func flip(b []byte) []byte {
	c := slices.Clone(b)
	c[len(c)/2] ^= 0x01
	return c
}

// reencrypt decrypts data with id and encrypts it to r.
func reencrypt(t *testing.T, data []byte, id age.Identity, r age.Recipient) []byte {
	t.Helper()
	dr, err := age.Decrypt(bytes.NewReader(data), id)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	w, err := age.Encrypt(&out, r)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(w, dr); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// TestIdentityFileRefused: an identity file its group or others can read
// is refused with what to do; one not on this host is ErrNoIdentity.
func TestIdentityFileRefused(t *testing.T) {
	key := newKey(t)
	for _, tt := range []struct {
		mode os.FileMode
		want string
	}{
		{0o600, ""},
		{0o400, ""},
		{0o640, "chmod 600"},
		{0o644, "chmod 600"},
		{0o606, "chmod 600"},
	} {
		if err := os.Chmod(key.file, tt.mode); err != nil {
			t.Fatal(err)
		}
		ids, err := spec.ReadIdentities(key.file)
		switch {
		case tt.want == "" && (err != nil || len(ids) != 1):
			t.Errorf("mode %04o: %v", tt.mode, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), key.file)):
			t.Errorf("mode %04o: %v, want a refusal naming the file and %q", tt.mode, err, tt.want)
		}
	}
	if _, err := spec.ReadIdentities(filepath.Join(t.TempDir(), "none")); !errors.Is(err, spec.ErrNoIdentity) {
		t.Errorf("absent: %v, want ErrNoIdentity", err)
	}
}

// TestRestoreCheckWithoutMemory: where the plaintext does not fit in a
// memory filesystem (here: memDir is on a disk), the restore check
// decrypts the snapshot in full and compares it, restores nothing and
// writes no plaintext; the drill, whose point is a restore, fails and
// says why, and so does recover --from-snapshot (the command's check and
// the agent's), before anything changes.
func TestRestoreCheckWithoutMemory(t *testing.T) {
	ep, _ := testetcd.Start(t)
	fill(t, ep, 50, 100)
	secret := putSecret(t, ep)
	key := newKey(t)
	k := keysOf(t, key.file, key)
	dir := filepath.Join(t.TempDir(), "backups")
	e := take(t, ep, dir, k)
	old := memDir
	memDir = t.TempDir() // not a tmpfs
	defer func() { memDir = old }()
	rc := CheckRestore(context.Background(), e, k)
	if !rc.OK || rc.Checked != CheckedDecrypt || !strings.Contains(rc.Note, "not a memory filesystem") {
		t.Errorf("restore check = %+v, want decrypted, not restored, and why", rc)
	}
	d := RunDrill(context.Background(), DrillPlan{Cluster: "c1", ClusterID: e.ClusterID(), Dir: dir, Keys: k})
	if d.OK || !strings.Contains(d.Error, "not a memory filesystem") {
		t.Errorf("drill = %+v, want failed with why", d)
	}
	if err := Precheck(e.Path(), k); err == nil || !strings.Contains(err.Error(), "not a memory filesystem") {
		t.Errorf("recover's precheck: %v, want refused with why", err)
	}
	if r, err := ForRestore(e.Path(), k); err == nil || !strings.Contains(err.Error(), "not a memory filesystem") || !strings.Contains(err.Error(), "make room") {
		r.Close()
		t.Errorf("the agent's restore: %v, want refused with why and what to do", err)
	}
	for _, root := range []string{dir, memDir} {
		_ = filepath.WalkDir(root, func(p string, de fs.DirEntry, err error) error {
			if err == nil && !de.IsDir() {
				if b, _ := os.ReadFile(p); bytes.Contains(b, secret) {
					t.Errorf("%s holds the secret", p)
				}
			}
			return nil
		})
	}
	// And with the identity but a forged file, the decrypting check
	// refuses it.
	writeFile(t, e.Path(), flip(mustRead(t, e.Path())))
	if rc := CheckRestore(context.Background(), e, k); rc.OK {
		t.Errorf("an altered snapshot passed the decrypting check: %+v", rc)
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestNewIdentityFile: keygen's file is 0600, read back by the agent's
// reader as the key of the recipient it printed, and never written over.
func TestNewIdentityFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "backup.key")
	r, err := NewIdentityFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("identity file: %v, %v", fi, err)
	}
	ids, err := spec.ReadIdentities(p)
	if err != nil || len(ids) != 1 || ids[0].(*age.X25519Identity).Recipient().String() != r {
		t.Fatalf("read back: %v, %v; want the identity of %s", ids, err, r)
	}
	before := mustRead(t, p)
	if _, err := NewIdentityFile(p); err == nil || !bytes.Equal(mustRead(t, p), before) {
		t.Errorf("a second keygen over the file: %v", err)
	}
}

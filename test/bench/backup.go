package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"

	"filippo.io/age"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/etcdkeeper/etcdkeeper/internal/backup"
	"github.com/etcdkeeper/etcdkeeper/internal/cluster"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
	"github.com/etcdkeeper/etcdkeeper/test/testbed"
)

// backupRun is one snapshot's way out (snapshot, verify, encrypt when
// encrypted, upload) and back (the restore drill from S3: download,
// decrypt, verify, restore), timed.
type backupRun struct {
	encrypted     bool
	take, upload  time.Duration
	drill         time.Duration
	steps         backup.Timings
	plain, onDisk int64
	// cpuOut, cpuBack: the bench process's CPU time (user + system) for
	// each way: etcd's side of the snapshot stream and the backup code,
	// not the S3 server's. Less moved by other work on the machine than
	// the wall time.
	cpuOut, cpuBack time.Duration
	// load: the machine's 1-minute load average before → after the run
	// (the bench shares it).
	load string
	// putP50, putP99: what the snapshot does to etcd's own clients: a put
	// every 20 ms to the member snapshotted, while the snapshot is taken.
	putP50, putP99 time.Duration
	puts, failed   int
}

func (r backupRun) out() time.Duration { return r.take + r.upload }

type backupRows struct {
	size  string
	plain []backupRun
	enc   []backupRun
}

// backupScenario (issue 31): one etcd (embedded) holding -backup-mb of
// random values, a real S3 server (versitygw over plain http on
// loopback), and each way timed -backup-runs times, plaintext and age
// encrypted in turn.
func (b *bench) backupScenario() {
	rows := backupRows{size: fmt.Sprintf("%d MB", b.cfg.backupMB)}
	b.scenario("backup", func(r *testbed.Runner) {
		ep := benchEtcd(r)
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second})
		must(r, err)
		defer cli.Close()
		t0 := time.Now()
		putRandom(r, cli, "/bench/backup", int(int64(b.cfg.backupMB)<<20/backupValue), backupValue)
		b.say("backup: %d MB written in %s", b.cfg.backupMB, time.Since(t0).Round(time.Second))
		s3 := benchS3(r)
		id, err := age.GenerateX25519Identity()
		must(r, err)
		keyFile := filepath.Join(r.TempDir(), "backup.key")
		must(r, os.WriteFile(keyFile, []byte(id.String()+"\n"), 0o600))
		keys, err := backup.KeysFor(spec.Encryption{Recipients: []string{id.Recipient().String()}, IdentityFile: keyFile})
		must(r, err)
		c, err := cluster.Dial([]string{ep}, nil)
		must(r, err)
		defer c.Close()
		for i := 0; i < b.cfg.backupRuns; i++ {
			order := []bool{false, true}
			if i%2 == 1 {
				slices.Reverse(order)
			}
			for _, enc := range order {
				k := backup.Keys{}
				if enc {
					k = keys
				}
				load0 := loadAvg()
				run := timeBackup(r, c, cli, s3, k, b.profile(i+1, encName(enc)))
				run.load = load0 + " → " + loadAvg()
				if enc {
					rows.enc = append(rows.enc, run)
				} else {
					rows.plain = append(rows.plain, run)
				}
				b.say("backup run %d (%s, load %s): snapshot %s (etcd's puts meanwhile: p50 %s, p99 %s, %d of %d failed), upload %s (CPU %s); drill %s (download %.1fs, decrypt %.1fs, streamed %v, verify %.1fs, restore %.1fs; CPU %s)",
					i+1, encName(enc), run.load, ms(run.take), msf(run.putP50), msf(run.putP99), run.failed, run.puts, ms(run.upload), ms(run.cpuOut), ms(run.drill), run.steps.Download, run.steps.Decrypt, run.steps.Streamed, run.steps.Verify, run.steps.Restore, ms(run.cpuBack))
			}
		}
	})
	b.mu.Lock()
	b.backups = append(b.backups, rows)
	b.mu.Unlock()
}

func encName(enc bool) string {
	if enc {
		return "age"
	}
	return "plaintext"
}

// backupValue: random (incompressible) values of 64 KiB.
const backupValue = 64 << 10

// timeBackup takes one snapshot into a fresh dir, uploads it, drills it
// from S3 (in a fresh dir: nothing local helps), and removes both.
// profile, when not nil, profiles each way ("out", "back").
func timeBackup(r testbed.TB, c *cluster.Client, cli *clientv3.Client, s3 spec.S3, k backup.Keys, profile func(way string) func()) backupRun {
	if profile == nil {
		profile = func(string) func() { return func() {} }
	}
	dir := filepath.Join(r.TempDir(), "backups")
	defer os.RemoveAll(dir)
	run := backupRun{encrypted: k.Encrypts()}
	// Each way starts with nothing of the last run's left to write back:
	// the S3 server's and the snapshots' dirty pages otherwise land on
	// whichever way comes next (the upload took 3.5 s or 7 s by turn).
	syscall.Sync()
	stop, cpu0 := profile("out"), selfCPU(r)
	stopPuts := putEvery(cli, 20*time.Millisecond)
	t0 := time.Now()
	e, err := (&backup.Taker{Client: c, Cluster: "bench", Member: "a", Dir: dir, By: backup.ByHand, Keys: k}).Take(context.Background())
	must(r, err)
	run.take = time.Since(t0)
	lat, failed := stopPuts()
	run.putP50, run.putP99, run.puts, run.failed = percentile(lat, 0.5), percentile(lat, 0.99), len(lat)+failed, failed
	t0 = time.Now()
	_, err = backup.Upload(context.Background(), s3, e)
	must(r, err)
	run.upload = time.Since(t0)
	run.cpuOut = selfCPU(r) - cpu0
	stop()
	run.onDisk, run.plain = e.Size, e.Size
	if e.Sidecar.Encryption != nil {
		run.plain = e.Sidecar.Encryption.PlainSize
	}
	drillDir := filepath.Join(r.TempDir(), "drill")
	must(r, os.MkdirAll(drillDir, 0o700))
	defer os.RemoveAll(drillDir)
	syscall.Sync()
	stop, cpu0 = profile("back"), selfCPU(r)
	d := backup.RunDrill(context.Background(), backup.DrillPlan{Cluster: "bench", ClusterID: e.ClusterID(), Dir: drillDir, S3: s3, Keys: k})
	run.cpuBack = selfCPU(r) - cpu0
	stop()
	if !d.OK || !strings.HasSuffix(d.Source, e.File) || d.Encrypted != k.Encrypts() {
		r.Fatalf("drill of %s: %+v", e.File, d)
	}
	run.drill, run.steps = time.Duration(d.Seconds*float64(time.Second)), d.Steps
	// The next run starts with the bucket as empty as this one did (1 GB
	// objects piling up made the later uploads take twice as long).
	if s3Root != "" && strings.TrimSuffix(s3.Prefix, "/") != "" {
		must(r, os.RemoveAll(filepath.Join(s3Root, s3.Bucket, strings.TrimSuffix(s3.Prefix, "/"))))
	}
	return run
}

// msf is d in milliseconds, to a tenth.
func msf(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond)) }

// putEvery puts a key every period on cli (one attempt each, a 2 s
// deadline) until the returned stop is called, which returns the latency
// of every put that succeeded and how many failed.
func putEvery(cli *clientv3.Client, period time.Duration) (stop func() ([]time.Duration, int)) {
	done := make(chan struct{})
	var lat []time.Duration
	failed := 0
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(period)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			t0 := time.Now()
			_, err := cli.Put(ctx, fmt.Sprintf("/bench/during-backup/%d", i%100), "x")
			cancel()
			if err != nil {
				failed++
				continue
			}
			lat = append(lat, time.Since(t0))
		}
	}()
	return func() ([]time.Duration, int) {
		close(done)
		<-finished
		return lat, failed
	}
}

// loadAvg is /proc/loadavg's 1-minute figure ("?" when unreadable).
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "?"
}

// selfCPU is the bench process's CPU time so far (user + system).
func selfCPU(r testbed.TB) time.Duration {
	t, err := cpuTicks(os.Getpid())
	must(r, err)
	return time.Duration(t) * time.Second / clockTicks
}

// profile returns, with -backup-cpuprofile, what starts a CPU profile of
// one way of run i (plaintext or age) and returns what stops it.
func (b *bench) profile(i int, enc string) func(way string) func() {
	if b.cfg.backupProfile == "" {
		return nil
	}
	return func(way string) func() {
		f, err := os.Create(filepath.Join(b.cfg.backupProfile, fmt.Sprintf("run%d-%s-%s.pprof", i, enc, way)))
		if err != nil {
			b.say("backup: no CPU profile: %v", err)
			return func() {}
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			b.say("backup: no CPU profile: %v", err)
			return func() {}
		}
		return func() { pprof.StopCPUProfile(); f.Close() }
	}
}

// benchEtcd runs one embedded etcd with room for the bench's db.
func benchEtcd(r *testbed.Runner) string {
	cfg := embed.NewConfig()
	cfg.Dir = r.TempDir()
	cfg.Logger, cfg.LogLevel = "zap", "error"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.QuotaBackendBytes = 8 << 30
	p, c := freeURL(r), freeURL(r)
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{p}, []url.URL{p}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{c}, []url.URL{c}
	cfg.InitialCluster = cfg.Name + "=" + p.String()
	e, err := embed.StartEtcd(cfg)
	must(r, err)
	r.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(time.Minute):
		r.Fatalf("etcd did not become ready")
	}
	return c.String()
}

func freeURL(r testbed.TB) url.URL {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(r, err)
	defer l.Close()
	return url.URL{Scheme: "http", Host: l.Addr().String()}
}

// s3Root is versitygw's posix root: its objects are files under it.
var s3Root string

// benchS3 builds and starts versitygw (tools/s3server/go.mod) on
// loopback and makes the bucket.
func benchS3(r *testbed.Runner) spec.S3 {
	dir := r.TempDir()
	bin := filepath.Join(dir, "versitygw")
	build := exec.Command("go", "build", "-modfile=tools/s3server/go.mod", "-o", bin, "github.com/versity/versitygw/cmd/versitygw")
	if out, err := build.CombinedOutput(); err != nil {
		r.Fatalf("building versitygw: %v\n%s", err, out)
	}
	root := filepath.Join(dir, "root")
	must(r, os.Mkdir(root, 0o700))
	s3Root = root
	creds := filepath.Join(dir, "s3.credentials")
	must(r, os.WriteFile(creds, []byte("bench-access:bench-secret-key\n"), 0o600))
	addr := freeURL(r).Host
	srv := exec.Command(bin, "--access", "bench-access", "--secret", "bench-secret-key", "--port", addr, "--quiet", "posix", root)
	log, err := os.Create(filepath.Join(dir, "versitygw.log"))
	must(r, err)
	srv.Stdout, srv.Stderr = log, log
	must(r, srv.Start())
	r.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait(); log.Close() })
	cfg := spec.S3{Endpoint: "http://" + addr, Bucket: "bench", Prefix: "backups/", CredentialsFile: creds}
	mc, err := minio.New(addr, &minio.Options{Creds: credentials.NewStaticV4("bench-access", "bench-secret-key", ""), BucketLookup: minio.BucketLookupPath})
	must(r, err)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := mc.MakeBucket(ctx, cfg.Bucket, minio.MakeBucketOptions{})
		cancel()
		if err == nil {
			return cfg
		}
		if time.Now().After(deadline) {
			r.Fatalf("versitygw on %s: make bucket: %v", addr, err)
		}
	}
}

// putRandom writes n random values of size bytes under prefix through 8
// concurrent requests.
func putRandom(r testbed.TB, cli *clientv3.Client, prefix string, n, size int) {
	next := make(chan int)
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			val := make([]byte, size)
			for i := range next {
				_, _ = rand.Read(val)
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				_, err := cli.Put(ctx, fmt.Sprintf("%s/%08d", prefix, i), string(val))
				cancel()
				if err != nil {
					errs <- err
					for range next {
					}
					return
				}
			}
			errs <- nil
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	for range 8 {
		if err := <-errs; err != nil {
			r.Fatalf("filling the db: %v", err)
		}
	}
}

// backupTable: per size, each way's median, plaintext beside age, and
// what encryption costs.
func (b *bench) backupTable() string {
	if len(b.backups) == 0 {
		return ""
	}
	var s strings.Builder
	s.WriteString("\nBackups (issue 31): one snapshot out (snapshot + verify [+ encrypt] + upload to S3) and back (restore drill from S3: download [+ decrypt] + verify + restore), medians\n\n")
	s.WriteString("| db | way | plaintext | age | encryption costs |\n|---|---|---|---|---|\n")
	for _, rw := range b.backups {
		med := func(runs []backupRun, f func(backupRun) time.Duration) time.Duration {
			var ds []time.Duration
			for _, x := range runs {
				ds = append(ds, f(x))
			}
			slices.Sort(ds)
			if len(ds) == 0 {
				return 0
			}
			return ds[len(ds)/2]
		}
		for _, way := range []struct {
			name string
			f    func(backupRun) time.Duration
			show func(time.Duration) string // how its figures are written
		}{
			{"snapshot", func(x backupRun) time.Duration { return x.take }, ms},
			{"upload", func(x backupRun) time.Duration { return x.upload }, ms},
			{"out (snapshot + upload)", backupRun.out, ms},
			{"back (drill: download, decrypt, verify, restore)", func(x backupRun) time.Duration { return x.drill }, ms},
			{"CPU out (bench process: etcd's side and ours)", func(x backupRun) time.Duration { return x.cpuOut }, ms},
			{"CPU back", func(x backupRun) time.Duration { return x.cpuBack }, ms},
			{"etcd put p50 during the snapshot (1 / 20 ms)", func(x backupRun) time.Duration { return x.putP50 }, msf},
			{"etcd put p99 during the snapshot", func(x backupRun) time.Duration { return x.putP99 }, msf},
		} {
			p, e := med(rw.plain, way.f), med(rw.enc, way.f)
			cost := "–"
			if p > 0 {
				cost = fmt.Sprintf("%+.1f %%", 100*(float64(e)-float64(p))/float64(p))
			}
			fmt.Fprintf(&s, "| %s | %s | %s | %s | %s |\n", rw.size, way.name, way.show(p), way.show(e), cost)
		}
		fmt.Fprintf(&s, "\n%d runs each way.\n", len(rw.plain))
	}
	return s.String()
}

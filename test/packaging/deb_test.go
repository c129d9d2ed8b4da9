package packaging

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestDebInstalls builds the package (`make package`, or takes
// $ETCDKEEPER_DEB) and installs it with a real `dpkg -i` into a throwaway
// root: --root points dpkg's files and database there, and
// --force-script-chrootless runs the maintainer scripts on this host with
// DPKG_ROOT set (the scripts honour it; the chroot dpkg would do otherwise
// needs a whole Debian in the root). --force-depends because that root has
// no libc6 or systemd package in its database. Then it checks what is
// installed, runs the installed binary, reinstalls over an edited spec,
// and purges.
func TestDebInstalls(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skips building the binary and the package")
	}
	dpkg := need(t, "dpkg", "dpkg")
	need(t, "dpkg-deb", "dpkg")
	if os.Geteuid() != 0 {
		t.Skip("dpkg -i needs root to give the installed files their owners")
	}
	deb := buildDeb(t)

	t.Run("control", func(t *testing.T) { checkControl(t, deb) })

	root := emptyRoot(t)
	inRoot := func(p string) string { return filepath.Join(root, p) }
	dpkgIn := func(args ...string) string {
		base := []string{"--root=" + root, "--log=" + inRoot("dpkg.log"),
			"--force-script-chrootless", "--force-depends"}
		return run(t, "", nil, dpkg, append(base, args...)...)
	}
	t.Log(dpkgIn("-i", deb))

	t.Run("files", func(t *testing.T) {
		for _, f := range []struct {
			path string
			mode os.FileMode
		}{
			{"usr/bin/etcdkeeper", 0o755},
			{"lib/systemd/system/etcdkeeper.service", 0o644},
			{"usr/lib/sysusers.d/etcdkeeper.conf", 0o644},
			{"usr/lib/tmpfiles.d/etcdkeeper.conf", 0o644},
			{"lib/systemd/system/etcdkeeper-reboot.service", 0o644},
			{"lib/systemd/system/etcdkeeper-reboot.path", 0o644},
			{"usr/share/etcdkeeper/examples/52etcdkeeper-unattended-upgrades", 0o644},
			{"etc/etcdkeeper/cluster.yaml", 0o644},
			{"usr/share/etcdkeeper/alerts.yml", 0o644},
			{"usr/share/etcdkeeper/grafana/etcdkeeper.json", 0o644},
			{"usr/share/doc/etcdkeeper/README.md", 0o644},
			{"usr/share/doc/etcdkeeper/docs/troubleshooting.md", 0o644},
			{"usr/share/man/man1/etcdkeeper.1.gz", 0o644},
			{"usr/share/man/man1/etcdkeeper-status.1.gz", 0o644},
			{"usr/share/man/man1/etcdkeeper-import-kubeadm.1.gz", 0o644},
			{"usr/share/bash-completion/completions/etcdkeeper", 0o644},
			{"usr/share/zsh/vendor-completions/_etcdkeeper", 0o644},
			{"usr/share/fish/vendor_completions.d/etcdkeeper.fish", 0o644},
		} {
			fi, err := os.Stat(inRoot(f.path))
			if err != nil {
				t.Errorf("not installed: /%s", f.path)
				continue
			}
			if fi.Mode().Perm() != f.mode {
				t.Errorf("/%s mode %v, want %v", f.path, fi.Mode().Perm(), f.mode)
			}
		}
		for src, dst := range map[string]string{
			"etcdkeeper.service":         "lib/systemd/system/etcdkeeper.service",
			"cluster.yaml":               "etc/etcdkeeper/cluster.yaml",
			"sysusers.d/etcdkeeper.conf": "usr/lib/sysusers.d/etcdkeeper.conf",
			"tmpfiles.d/etcdkeeper.conf": "usr/lib/tmpfiles.d/etcdkeeper.conf",
			"alerts.yml":                 "usr/share/etcdkeeper/alerts.yml",
			"grafana/etcdkeeper.json":    "usr/share/etcdkeeper/grafana/etcdkeeper.json",
		} {
			if readFile(t, packagingFile(t, src)) != readFile(t, inRoot(dst)) {
				t.Errorf("/%s differs from packaging/%s", dst, src)
			}
		}
		conffiles := run(t, "", nil, "dpkg-query", "--admindir="+inRoot("var/lib/dpkg"), "-W", "-f=${Conffiles}", "etcdkeeper")
		if !strings.Contains(conffiles, "/etc/etcdkeeper/cluster.yaml ") {
			t.Errorf("dpkg does not track /etc/etcdkeeper/cluster.yaml as a conffile: %q", conffiles)
		}
	})

	t.Run("postinst", func(t *testing.T) {
		if _, err := os.Lstat(inRoot("etc/systemd/system/multi-user.target.wants/etcdkeeper.service")); err == nil {
			t.Error("installing enabled the service; it must not")
		}
		if _, err := os.Lstat(inRoot("etc/systemd/system/paths.target.wants/etcdkeeper-reboot.path")); err == nil {
			t.Error("installing enabled etcdkeeper-reboot.path; reboots are the operator's to enable")
		}
		need(t, "systemd-sysusers", "systemd")
		need(t, "systemd-tmpfiles", "systemd")
		uid, gid := lookupUser(t, inRoot("etc/passwd"), "etcd")
		for dir, mode := range map[string]os.FileMode{"var/lib/etcd": 0o700, "var/lib/etcdkeeper": 0o700} {
			fi, err := os.Stat(inRoot(dir))
			if err != nil {
				t.Errorf("postinst did not create /%s: %v", dir, err)
				continue
			}
			st := fi.Sys().(*syscall.Stat_t)
			if fi.Mode().Perm() != mode || int(st.Uid) != uid || int(st.Gid) != gid {
				t.Errorf("/%s is %v %d:%d, want %v etcd:etcd (%d:%d)", dir, fi.Mode().Perm(), st.Uid, st.Gid, mode, uid, gid)
			}
		}
	})

	bin := inRoot("usr/bin/etcdkeeper")
	spec := inRoot("etc/etcdkeeper/cluster.yaml")
	t.Run("binary", func(t *testing.T) {
		if out := run(t, "", nil, bin, "version"); !strings.HasPrefix(out, "etcdkeeper ") {
			t.Errorf("etcdkeeper version: %q", out)
		}
		out := run(t, "", nil, bin, "validate", "--config", spec)
		t.Log(strings.TrimSpace(out))
		if !strings.Contains(out, "valid") || !strings.Contains(out, "3 members") {
			t.Errorf("validate on the shipped spec: %q", out)
		}
	})

	t.Run("unit", func(t *testing.T) {
		verifyUnit(t, readFile(t, inRoot("lib/systemd/system/etcdkeeper.service")), bin)
	})

	t.Run("reinstall keeps an edited spec", func(t *testing.T) {
		edited := readFile(t, spec) + "# edited by the operator\n"
		if err := os.WriteFile(spec, []byte(edited), 0o644); err != nil {
			t.Fatal(err)
		}
		dpkgIn("-i", deb)
		if readFile(t, spec) != edited {
			t.Error("reinstalling the package replaced the operator's spec")
		}
	})

	t.Run("purge keeps data", func(t *testing.T) {
		data := inRoot("var/lib/etcd/etcd-a/member/snap/db")
		if err := os.MkdirAll(filepath.Dir(data), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(data, []byte("the key space"), 0o600); err != nil {
			t.Fatal(err)
		}
		dpkgIn("--purge", "etcdkeeper")
		if _, err := os.Stat(inRoot("etc/etcdkeeper")); !os.IsNotExist(err) {
			t.Errorf("purge left /etc/etcdkeeper (err %v)", err)
		}
		if _, err := os.Stat(bin); !os.IsNotExist(err) {
			t.Errorf("purge left /usr/bin/etcdkeeper (err %v)", err)
		}
		if _, err := os.Stat(data); err != nil {
			t.Errorf("purge removed etcd data: %v", err)
		}
	})
}

// buildDeb returns $ETCDKEEPER_DEB, or builds the package with
// `make package` into a temp dir.
func buildDeb(t *testing.T) string {
	t.Helper()
	if deb := os.Getenv("ETCDKEEPER_DEB"); deb != "" {
		return deb
	}
	makeBin := need(t, "make", "make")
	deb := filepath.Join(t.TempDir(), "etcdkeeper_test.deb")
	t.Log(strings.TrimSpace(run(t, repoRoot(t), nil, makeBin, "--no-print-directory", "package", "DEB="+deb)))
	return deb
}

// checkControl reads the package's control data as dpkg-deb sees it.
func checkControl(t *testing.T, deb string) {
	control := run(t, "", nil, "dpkg-deb", "--field", deb)
	for _, want := range []string{"Package: etcdkeeper\n", "Depends: libc6, systemd | adduser\n"} {
		if !strings.Contains(control, want) {
			t.Errorf("control lacks %q:\n%s", want, control)
		}
	}
	if conffiles := run(t, "", nil, "dpkg-deb", "--info", deb, "conffiles"); strings.TrimSpace(conffiles) != "/etc/etcdkeeper/cluster.yaml" {
		t.Errorf("conffiles = %q, want only /etc/etcdkeeper/cluster.yaml", conffiles)
	}
	if strings.Contains(control, "procps") {
		t.Error("the package depends on procps; the unit's reload was made not to need it")
	}
}

// emptyRoot makes a root with an empty dpkg database.
func emptyRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{"var/lib/dpkg/updates", "var/lib/dpkg/info", "etc"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "var/lib/dpkg/status"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

// lookupUser finds a user's uid and gid in a passwd file.
func lookupUser(t *testing.T, passwd, name string) (uid, gid int) {
	t.Helper()
	f, err := os.Open(passwd)
	if err != nil {
		t.Fatalf("postinst created no users: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ":")
		if len(fields) >= 7 && fields[0] == name {
			if fields[5] != "/var/lib/etcd" || fields[6] != "/usr/sbin/nologin" {
				t.Errorf("user %s: home %s shell %s, want /var/lib/etcd /usr/sbin/nologin", name, fields[5], fields[6])
			}
			uid, _ = strconv.Atoi(fields[2])
			gid, _ = strconv.Atoi(fields[3])
			return uid, gid
		}
	}
	t.Fatalf("postinst did not create user %s in %s", name, passwd)
	return 0, 0
}

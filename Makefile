# etcdkeeper — see README.md. `make run` starts a local 3-member cluster,
# `make test` runs every test.
SHELL   := /bin/bash
GO      ?= go
BIN     := bin/etcdkeeper
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)

.PHONY: all build run test test-unit test-integration fuzz vet lint generate check-generate clean

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/etcdkeeper

# Command 1: a local 3-member cluster on 127.0.0.1, .2 and .3 from
# examples/cluster.yaml, data under examples/data/. Ctrl-C stops it.
run: build
	./scripts/run-local.sh

# Command 2: every test. Unit tests with -race (-short: pure logic), the
# packaging checks, then the tests that start real etcd: the packages' own
# (embedded etcd) and the integration tests that run real agents on
# 127.0.x.y. Both mostly wait: the packages' tests run 4 packages at a time,
# the integration tests 8 clusters at a time.
test: vet lint check-generate test-unit test-packaging test-integration

vet:
	$(GO) vet ./...

# Static checks beyond vet, run as Go tools from tools/go.mod: staticcheck
# (staticcheck.conf says which checks) and errorlint -errorf (errors are
# wrapped with %w, compared with errors.Is, unwrapped with errors.As).
lint:
	$(GO) tool -modfile=tools/go.mod staticcheck ./...
	$(GO) tool -modfile=tools/go.mod go-errorlint -errorf ./...

# The String methods of enums (*_string.go, *_string_test.go) come from
# stringer, run as a Go tool from tools/go.mod by the //go:generate lines
# next to each enum; internal/spec/etcdflags_gen.go (the built-in etcd's
# flags) from internal/spec/gen_etcdflags.go. check-generate regenerates
# them and fails when that changed or added any: run `make generate` and
# commit the result.
GENERATED = find . -name '*_string.go' -o -name '*_string_test.go' -o -name '*_gen.go' | sort | xargs -r sha256sum

generate:
	$(GO) generate ./...

check-generate:
	@before=$$($(GENERATED)); $(GO) generate ./... && after=$$($(GENERATED)) && \
	if [ "$$before" != "$$after" ]; then \
		diff <(echo "$$before") <(echo "$$after"); \
		echo "generated files were out of date: run make generate and commit them"; exit 1; \
	fi

# test/packaging runs in full in test-packaging, and test/integration does
# nothing under -short: the race run leaves both out.
UNIT_PKGS = $(shell $(GO) list ./... | grep -v -e '/test/packaging$$' -e '/test/integration$$')

test-unit:
	$(GO) test -race -short -count=1 -timeout 10m $(UNIT_PKGS)

test-integration: build
	$(GO) test -count=1 -p 4 -timeout 10m ./internal/... ./cmd/... ./test/chaos/
	ETCDKEEPER_BIN=$(CURDIR)/$(BIN) $(GO) test -count=1 -timeout 20m -parallel 8 -v ./test/integration/ 2>&1 | grep -Ev "^=== (RUN|PAUSE|CONT|NAME)"; exit $${PIPESTATUS[0]}

# The plain etcd binaries the rollout tests run (test/testbed EtcdBinary:
# built from their Go modules, cached under ~/.cache/etcdkeeper-test).
# make test builds them when missing; .ci/run builds them first, alone.
.PHONY: etcd-binaries
etcd-binaries:
	$(GO) test -count=1 -timeout 30m -run '^TestEtcdBinariesBuild$$' ./test/integration/

fuzz:
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime 60s ./internal/spec/
	$(GO) test -run '^$$' -fuzz FuzzImport -fuzztime 60s ./internal/kubeadm/

clean:
	rm -rf bin dist examples/data

# The Debian package, dist/etcdkeeper_<version>_<arch>.deb (packaging/README.md).
# nfpm runs as a Go tool from its own module, tools/go.mod, so the root module
# does not depend on it. The version is the last v* tag without its "v"
# (1.2.0+3.gabc1234 three commits after v1.2.0), or 0.0.0~dev without a tag.
PKG_VERSION ?= $(or $(shell git describe --tags --match 'v[0-9]*' --dirty 2>/dev/null | sed -e 's/^v//' -e 's/-\([0-9]*\)-g/+\1.g/' -e 's/-dirty$$/.dirty/'),0.0.0~dev)
# Debian's name for the architecture go builds for.
PKG_ARCH    ?= $(shell $(GO) env GOARCH | sed -e 's/^386$$/i386/' -e 's/^arm$$/armhf/' -e 's/^ppc64le$$/ppc64el/')
DEB         := dist/etcdkeeper_$(PKG_VERSION)_$(PKG_ARCH).deb

.PHONY: package test-packaging

# The man pages (one per command, gzipped as Debian wants them) and the
# bash, zsh and fish completions come from the command tree itself
# (etcdkeeper gen-docs, cobra's generators), into dist/doc/.
package: build
	@mkdir -p dist
	rm -rf dist/doc
	$(BIN) gen-docs --man dist/doc/man --completion dist/doc/completion
	gzip -9n dist/doc/man/*.1
	PKG_VERSION=$(PKG_VERSION) PKG_ARCH=$(PKG_ARCH) $(GO) tool -modfile=tools/go.mod nfpm pkg --packager deb -f packaging/nfpm.yaml --target $(DEB)

# Checks the unit (systemd-analyze verify and security), the alert rules, and
# the package installed with dpkg into a throwaway root. Needs the Debian
# packages systemd and dpkg (and runs promtool if prometheus is installed).
test-packaging:
	$(GO) test -count=1 -timeout 5m -v ./test/packaging/

# End-to-end test bed on real systemd hosts (docs/testing.md, "End-to-end test
# bed"): three Debian 12 containers (systemd-nspawn, systemd as PID 1)
# install $(DEB) and run the cluster as the packaged service through
# start, kill, WAL corruption, reload, watchdog, power cycle,
# remove/reinstall, a host cut off the network for a minute, a package
# upgrade on all hosts at once, certificates renewed by the agents and all
# hosts asking for a reboot at once, rebooted in turns (each host
# in its own network namespace on a bridge of the run). Needs root and the Debian packages systemd-container,
# debootstrap, curl and jq. The Debian root is cached in
# /var/cache/etcdkeeper-e2e/ (built on the first run, ~1 min).
# The upgrade step installs a second package, of another version
# (UPGRADE_VERSION), on all three hosts in the same second; it is built
# from the same tree with another main.version, then bin/ is built again.
UPGRADE_VERSION ?= $(PKG_VERSION)+e2e.upgrade
UPGRADE_DEB     := dist/etcdkeeper_$(UPGRADE_VERSION)_$(PKG_ARCH).deb
.PHONY: e2e
e2e: package
	$(MAKE) --no-print-directory package VERSION=$(UPGRADE_VERSION) PKG_VERSION=$(UPGRADE_VERSION)
	$(MAKE) --no-print-directory build
	$(GO) build -o bin/e2e-mkcerts ./test/e2e/mkcerts
	E2E_MKCERTS=$(CURDIR)/bin/e2e-mkcerts timeout -k 60 1500 test/e2e/run.sh $(DEB) $(UPGRADE_DEB)

# Benchmarks and the chaos run (docs/benchmarks.md), on the test bed:
# real agents and real etcd. `make bench` (members on 127.0.x.y) prints one
# table of medians (add BENCH_FLAGS=-1gb for the 1 GB repair; a few minutes
# more per run); `make chaos` runs each member in its own network namespace
# (as root; on loopback without partitions otherwise), injects faults for
# CHAOS_DURATION, then heals and checks linearizability, lost writes,
# membership, member IDs and quorum safety. The smoke targets are their
# short forms for CI: bench-smoke asserts no target, chaos-smoke fails like
# chaos does, and must inject at least the faults CHAOS_SMOKE_MIN lists.
# A failing run keeps its logs and says where.
.PHONY: bench bench-smoke bench-certs chaos chaos-smoke bench-bin chaos-bin
CHAOS_DURATION ?= 3m
CHAOS_SMOKE_MIN ?= partition=2,spec-skew=1,corrupt-wal=1,kill-etcd=1,slow-link=1,slow-host=1,alarm-corrupt=1,impostor=1,nospace=1

bench-bin: build
	$(GO) build -o bin/bench ./test/bench

chaos-bin: build
	$(GO) build -o bin/chaos ./test/chaos

bench: bench-bin
	bin/bench -bin $(BIN) $(BENCH_FLAGS)

# The certificates' time-compressed runs (docs/benchmarks.md): renewal of
# 2-minute certificates on 3 members for 4 lifetimes under a TLS writer and
# a handshake prober; the CA rotation under a writer, with a kill -9 in
# each phase; the kubeadm-shaped renewal and rotation. About 12 minutes.
bench-certs: build
	ETCDKEEPER_BIN=$(CURDIR)/$(BIN) ETCDKEEPER_CERT_LIFETIME=2m ETCDKEEPER_CERT_LIFETIMES=4 $(GO) test -count=1 -timeout 30m -v \
		-run '^(TestCertRenewal|TestCARotation|TestKubeadmCertificates)$$' ./test/integration/ 2>&1 | grep -E '^(---|ok|FAIL|PASS)|_test.go:[0-9]+: (renewal|CA rotation|kubeadm|phase)'; exit $${PIPESTATUS[0]}

bench-smoke: bench-bin
	timeout -k 30 600 bin/bench -bin $(BIN) -smoke $(BENCH_FLAGS)

chaos: chaos-bin
	bin/chaos -bin $(BIN) -duration $(CHAOS_DURATION) $(CHAOS_FLAGS)

chaos-smoke: chaos-bin
	timeout -k 30 900 bin/chaos -bin $(BIN) -duration 90s -big-mb 0 -min-faults $(CHAOS_SMOKE_MIN) $(CHAOS_FLAGS)

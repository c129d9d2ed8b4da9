// Package packaging checks what the Debian package installs: the systemd
// unit (systemd-analyze verify and security), the Prometheus alert rules,
// the Grafana dashboard's metric names (against what the agent and etcd
// register; test/integration's TestDashboard runs its queries in a real
// Prometheus), and the package itself, installed with dpkg into a
// throwaway root.
//
// The tests need the Debian packages systemd (systemd-analyze,
// systemd-sysusers, systemd-tmpfiles) and dpkg, and root for dpkg; each
// test skips with the reason when its tool is missing. promtool (package
// prometheus) is used when present; .ci/run installs it. Run them with `make test-packaging`
// or `go test ./test/packaging/`; -short skips building the package.
package packaging

package spec

import (
	"errors"
	"strings"
	"testing"
)

// twoMembers is a valid spec that the error cases below extend; its lines
// are 1 to 4, so added lines start at 5.
const twoMembers = `cluster: {name: t}
members:
  - {name: a, peerURLs: [http://10.0.0.1:2380], clientURLs: [http://10.0.0.1:2379]}
  - {name: b, peerURLs: [http://10.0.0.2:2380], clientURLs: [http://10.0.0.2:2379]}
`

// twoLocal are two members on one machine (loopback addresses, like the
// local demo): their paths must not collide.
const twoLocal = `cluster: {name: t}
members:
  - {name: a, peerURLs: [http://127.0.0.1:2380], clientURLs: [http://127.0.0.1:2379]}
  - {name: b, peerURLs: [http://127.0.0.2:2380], clientURLs: [http://127.0.0.2:2379]}
`

// parseErrors parses text as spec.yaml and returns its problems.
func parseErrors(t *testing.T, text string) Errors {
	t.Helper()
	s, err := Parse([]byte(text), "spec.yaml")
	if err == nil {
		t.Fatalf("Parse succeeded, want errors; spec: %+v", s)
	}
	var errs *Errors
	if !errors.As(err, &errs) {
		t.Fatalf("Parse error %T %v is not *Errors", err, err)
	}
	return *errs
}

func TestValidationErrors(t *testing.T) {
	tests := []struct {
		name string
		spec string
		// want is the start of one error line: "spec.yaml:LINE: " and
		// the field path; msg must appear in that line.
		want string
		msg  string
	}{
		{"missing cluster.name", "cluster: {}\nmembers: [{name: a, peerURLs: [http://10.0.0.1:2380], clientURLs: [http://10.0.0.1:2379]}]\n",
			"spec.yaml:1: cluster.name", "missing"},
		{"missing cluster", "members: [{name: a, peerURLs: [http://10.0.0.1:2380], clientURLs: [http://10.0.0.1:2379]}]\n",
			"spec.yaml:1: cluster.name", "missing"},
		{"bad cluster.name", strings.Replace(twoMembers, "name: t}", "name: t/1}", 1),
			"spec.yaml:1: cluster.name", "use only letters, digits"},
		{"no members", "cluster: {name: t}\nmembers: []\n",
			"spec.yaml:2: members", "none listed"},
		{"members not a list", "cluster: {name: t}\nmembers: {a: 1}\n",
			"spec.yaml:2: members", "must be a list"},
		{"member not a mapping", twoMembers + "  - node3\n",
			"spec.yaml:5: members[2]", "must be a mapping"},
		{"member without name", twoMembers + "  - {peerURLs: [http://10.0.0.3:2380], clientURLs: [http://10.0.0.3:2379]}\n",
			"spec.yaml:5: members[2]", "missing name"},
		{"bad member name", twoMembers + "  - {name: node 3, peerURLs: [http://10.0.0.3:2380], clientURLs: [http://10.0.0.3:2379]}\n",
			"spec.yaml:5: members[2].name", "use only letters"},
		{"long member name", twoMembers + "  - {name: " + strings.Repeat("x", 254) + ", peerURLs: [http://10.0.0.3:2380], clientURLs: [http://10.0.0.3:2379]}\n",
			"spec.yaml:5: members[2].name", "longer than 253"},
		{"dot-dot member name", twoMembers + "  - {name: .., peerURLs: [http://10.0.0.3:2380], clientURLs: [http://10.0.0.3:2379]}\n",
			"spec.yaml:5: members[2].name", "path element"},
		{"duplicate name", twoMembers + "  - {name: a, peerURLs: [http://10.0.0.3:2380], clientURLs: [http://10.0.0.3:2379]}\n",
			"spec.yaml:5: members[2].name", `"a": already used by member a (line 3)`},
		{"duplicate peer URL", twoMembers + "  - {name: c, peerURLs: [HTTP://10.0.0.2:2380], clientURLs: [http://10.0.0.3:2379]}\n",
			"spec.yaml:5: members[2].peerURLs[0]", "already used by member b (line 4)"},
		{"duplicate client URL", twoMembers + "  - {name: c, peerURLs: [http://10.0.0.3:2380], clientURLs: [http://10.0.0.1:2379]}\n",
			"spec.yaml:5: members[2].clientURLs[0]", "already used by member a (line 3)"},
		{"empty peerURLs", twoMembers + "  - {name: c, peerURLs: [], clientURLs: [http://10.0.0.3:2379]}\n",
			"spec.yaml:5: members[2].peerURLs", "empty"},
		{"missing clientURLs", twoMembers + "  - name: c\n    peerURLs: [http://10.0.0.3:2380]\n",
			"spec.yaml:5: members[2].clientURLs", "empty"},
		{"malformed URL", twoMembers + "  - {name: c, peerURLs: ['http://10.0.0.3:2380%zz'], clientURLs: [http://10.0.0.3:2379]}\n",
			"spec.yaml:5: members[2].peerURLs[0]", "not a URL"},
		{"bad scheme", twoMembers + "  - name: c\n    peerURLs: [htp://x:2380]\n    clientURLs: [http://10.0.0.3:2379]\n",
			"spec.yaml:6: members[2].peerURLs[0]", `"htp://x:2380": scheme must be http or https`},
		{"no scheme", twoMembers + "  - {name: c, peerURLs: [node3:2380], clientURLs: [http://10.0.0.3:2379]}\n",
			"spec.yaml:5: members[2].peerURLs[0]", "scheme must be http or https"},
		{"empty URL keeps its index", twoMembers + "  - name: c\n    peerURLs:\n      -\n      - htp://c:2380\n    clientURLs: [http://10.0.0.3:2379]\n",
			"spec.yaml:8: members[2].peerURLs[1]", "scheme must be"},
		{"no port", twoMembers + "  - {name: c, peerURLs: [http://10.0.0.3:2380], clientURLs: [http://10.0.0.3]}\n",
			"spec.yaml:5: members[2].clientURLs[0]", "missing port"},
		{"port out of range", twoMembers + "  - {name: c, peerURLs: [http://10.0.0.3:99999], clientURLs: [http://10.0.0.3:2379]}\n",
			"spec.yaml:5: members[2].peerURLs[0]", "1 to 65535"},
		{"URL with path", twoMembers + "  - {name: c, peerURLs: [http://10.0.0.3:2380/], clientURLs: [http://10.0.0.3:2379]}\n",
			"spec.yaml:5: members[2].peerURLs[0]", "must not have a path"},
		{"URL with query", twoMembers + "  - {name: c, peerURLs: [http://10.0.0.3:2380], clientURLs: ['http://10.0.0.3:2379?x=1']}\n",
			"spec.yaml:5: members[2].clientURLs[0]", "must not have a path, query"},
		{"advertised wildcard", twoMembers + "  - {name: c, peerURLs: [http://0.0.0.0:2380], clientURLs: [http://10.0.0.3:2379]}\n",
			"spec.yaml:5: members[2].peerURLs[0]", "cannot reach 0.0.0.0"},
		{"listen URL with a name", twoMembers + "  - name: c\n    peerURLs: [http://c:2380]\n    clientURLs: [http://c:2379]\n    listenPeerURLs: [http://c:2380]\n",
			"spec.yaml:8: members[2].listenPeerURLs[0]", "use an IP or 0.0.0.0"},
		{"shared listen URL", twoMembers + "  - name: c\n    peerURLs: [http://c:2380]\n    clientURLs: [http://c:2379]\n    listenClientURLs: [http://10.0.0.1:2379]\n",
			"spec.yaml:8: members[2].listenClientURLs[0]", "which member a also binds (members[0].clientURLs[0], line 3)"},
		{"peer URL on another member's client port", twoMembers + "  - {name: c, peerURLs: [https://10.0.0.1:2379], clientURLs: [http://10.0.0.3:2379]}\n",
			"spec.yaml:5: members[2].peerURLs[0]", "which member a also binds"},
		{"one member binds a port twice", twoMembers + "  - {name: c, peerURLs: [http://c:2380], clientURLs: [http://10.0.0.3:2380]}\n",
			"spec.yaml:5: members[2].clientURLs[0]", "binds 10.0.0.3:2380, which members[2].peerURLs[0] (line 5) also binds"},
		{"agent addr on the client port", twoMembers + "  - {name: c, peerURLs: [http://10.0.0.3:2380], clientURLs: [http://10.0.0.3:2379], agentAddr: '10.0.0.3:2379'}\n",
			"spec.yaml:5: members[2].agentAddr", "binds 10.0.0.3:2379"},
		{"owned flag", twoMembers + "etcd:\n  flags:\n    snapshot-count: 5\n    --initial-cluster-state: new\n",
			"spec.yaml:8: etcd.flags.initial-cluster-state", "remove it: etcdkeeper sets --initial-cluster-state from the spec"},
		{"owned flag without dashes", twoMembers + "etcd:\n  flags: {listen-client-urls: 'http://0.0.0.0:2379'}\n",
			"spec.yaml:6: etcd.flags.listen-client-urls", "remove it: etcdkeeper sets --listen-client-urls"},
		{"wal-dir flag", twoMembers + "etcd:\n  flags: {wal-dir: /wal}\n",
			"spec.yaml:6: etcd.flags.wal-dir", "remove it"},
		{"initial-cluster flag", twoMembers + "etcd:\n  flags:\n    initial-cluster: a=http://10.0.0.1:2380\n",
			"spec.yaml:7: etcd.flags.initial-cluster", "remove it: etcdkeeper sets --initial-cluster from the spec"},
		{"initial-cluster-token flag", twoMembers + "etcd:\n  flags:\n    initial-cluster-token: x\n",
			"spec.yaml:7: etcd.flags.initial-cluster-token", "remove it: etcdkeeper sets --initial-cluster-token from the spec"},
		{"force-new-cluster", twoMembers + "etcd:\n  flags:\n    snapshot-count: 5\n    force-new-cluster: true\n",
			"spec.yaml:8: etcd.flags.force-new-cluster", "remove it: --force-new-cluster"},
		{"force-new-cluster false is refused too", twoMembers + "etcd:\n  flags:\n    --force-new-cluster: false\n",
			"spec.yaml:7: etcd.flags.force-new-cluster", "remove it"},
		{"unsafe-no-fsync", twoMembers + "etcd:\n  flags: {unsafe-no-fsync: true}\n",
			"spec.yaml:6: etcd.flags.unsafe-no-fsync", "remove it: --unsafe-no-fsync"},
		{"strict-reconfig-check false", twoMembers + "etcd:\n  flags:\n    strict-reconfig-check: false\n",
			"spec.yaml:7: etcd.flags.strict-reconfig-check", "must stay true"},
		{"strict-reconfig-check 0", twoMembers + "etcd:\n  flags:\n    strict-reconfig-check: \"0\"\n",
			"spec.yaml:7: etcd.flags.strict-reconfig-check", "must stay true"},
		{"strict-reconfig-check not a bool", twoMembers + "etcd:\n  flags:\n    strict-reconfig-check: maybe\n",
			"spec.yaml:7: etcd.flags.strict-reconfig-check", "must stay true"},
		{"discovery-srv", twoMembers + "etcd:\n  flags:\n    discovery-srv: example.com\n",
			"spec.yaml:7: etcd.flags.discovery-srv", "remove it: etcdkeeper bootstraps the cluster from the spec's members"},
		{"discovery-srv-name", twoMembers + "etcd:\n  flags:\n    discovery-srv-name: prod\n",
			"spec.yaml:7: etcd.flags.discovery-srv-name", "remove it: etcdkeeper bootstraps"},
		{"discovery-token", twoMembers + "etcd:\n  flags:\n    discovery-token: abc\n",
			"spec.yaml:7: etcd.flags.discovery-token", "remove it: etcdkeeper bootstraps"},
		{"discovery-endpoints", twoMembers + "etcd:\n  flags:\n    discovery-endpoints: http://10.0.0.9:2379\n",
			"spec.yaml:7: etcd.flags.discovery-endpoints", "remove it: etcdkeeper bootstraps"},
		{"discovery (v2, gone)", twoMembers + "etcd:\n  flags:\n    discovery: https://discovery.etcd.io/x\n",
			"spec.yaml:7: etcd.flags.discovery", "remove it: etcdkeeper bootstraps"},
		{"any discovery- flag", twoMembers + "etcd:\n  flags:\n    discovery-dial-timeout: 2s\n",
			"spec.yaml:7: etcd.flags.discovery-dial-timeout", "remove it: etcdkeeper bootstraps"},
		{"unknown flag", twoMembers + "etcd:\n  flags:\n    snapshot-cout: 5\n",
			"spec.yaml:7: etcd.flags.snapshot-cout", "not a flag of etcd 3.7.3"},
		{"unknown flag, close to one", twoMembers + "etcd:\n  flags:\n    snapshot-cout: 5\n",
			"spec.yaml:7: etcd.flags.snapshot-cout", "did you mean snapshot-count?"},
		{"experimental flag renamed", twoMembers + "etcd:\n  flags:\n    experimental-compact-hash-check-time: 1m\n",
			"spec.yaml:7: etcd.flags.experimental-compact-hash-check-time", "write compact-hash-check-time"},
		{"experimental flag gone", twoMembers + "etcd:\n  flags:\n    experimental-initial-corrupt-check: true\n",
			"spec.yaml:7: etcd.flags.experimental-initial-corrupt-check", "feature-gates"},
		{"flag etcd ignores", twoMembers + "etcd:\n  flags:\n    peer-heartbeat-interval: 100\n",
			"spec.yaml:7: etcd.flags.peer-heartbeat-interval", "ignores it"},
		{"version flag", twoMembers + "etcd:\n  flags:\n    version: true\n",
			"spec.yaml:7: etcd.flags.version", "prints its version and exits"},
		{"help flag", twoMembers + "etcd:\n  flags:\n    help: true\n",
			"spec.yaml:7: etcd.flags.help", "not a flag of etcd"},
		{"external etcd: dangerous flags still refused", twoMembers + "etcd:\n  binary: /usr/local/bin/etcd\n  flags:\n    force-new-cluster: true\n",
			"spec.yaml:8: etcd.flags.force-new-cluster", "remove it"},
		{"not a flag name", twoMembers + "etcd:\n  flags:\n    snapshot_count: 5\n",
			"spec.yaml:7: etcd.flags.snapshot_count", "not an etcd flag name"},
		{"flag twice", twoMembers + "etcd:\n  flags:\n    snapshot-count: 5\n    --snapshot-count: 6\n",
			"spec.yaml:8: etcd.flags.snapshot-count", "first at line 7"},
		{"flag without value", twoMembers + "etcd:\n  flags:\n    snapshot-count:\n",
			"spec.yaml:7: etcd.flags.snapshot-count", "needs one value"},
		{"zero interval", twoMembers + "agent:\n  interval: 0s\n",
			"spec.yaml:6: agent.interval", "must be more than 0"},
		{"negative learnerTimeout", twoMembers + "agent:\n  learnerTimeout: -1m\n",
			"spec.yaml:6: agent.learnerTimeout", "must be more than 0"},
		{"stopTimeout not a duration", twoMembers + "agent:\n  stopTimeout: 10\n",
			"spec.yaml:6: agent.stopTimeout", "not a duration"},
		{"maxDisrupted 0", twoMembers + "maintenance:\n  maxDisrupted: 0\n",
			"spec.yaml:6: maintenance.maxDisrupted", "must be 1, or at most the failure tolerance of the spec's 2 members"},
		{"maxDisrupted 2 of 2", twoMembers + "maintenance:\n  maxDisrupted: 2\n",
			"spec.yaml:6: maintenance.maxDisrupted", "would leave no quorum"},
		{"maxPerHour 0", twoMembers + "repair:\n  maxPerHour: 0\n",
			"spec.yaml:6: repair.maxPerHour", "must be at least 1"},
		{"snapshotMaxAge negative", twoMembers + "repair:\n  snapshotMaxAge: -1m\n",
			"spec.yaml:6: repair.snapshotMaxAge", "must not be negative"},
		{"keepBackups 0", twoMembers + "repair:\n  keepBackups: 0\n",
			"spec.yaml:6: repair.keepBackups", "must be at least 1"},
		{"minFreeMB negative", twoMembers + "repair:\n  minFreeMB: -5\n",
			"spec.yaml:6: repair.minFreeMB", "must be at least 0"},
		{"minFreeMB not a number", twoMembers + "repair:\n  minFreeMB: lots\n",
			"spec.yaml:6: repair.minFreeMB", "must be a whole number"},
		{"enabled not a bool", twoMembers + "repair:\n  enabled: sometimes\n",
			"spec.yaml:6: repair.enabled", "must be true or false"},
		{"shared data dir", twoLocal + "etcd:\n  dataDir: /var/lib/etcd\n",
			"spec.yaml:6: members[1]", "data dir /var/lib/etcd is also member a's: put {name} in etcd.dataDir"},
		{"shared member data dir", strings.Replace(twoLocal, "name: b,", "name: b, dataDir: /var/lib/etcd/a,", 1),
			"spec.yaml:4: members[1]", "data dir /var/lib/etcd/a is also member a's"},
		{"shared state dir", twoLocal + "agent:\n  stateDir: /var/lib/etcdkeeper\n",
			"spec.yaml:6: members[1]", "state dir /var/lib/etcdkeeper is also member a's"},
		{"backup dir inside the member dir", twoMembers + "agent:\n  backupDir: /var/lib/etcd/{name}/member/old\n",
			"spec.yaml:6: members[0]", "must be neither inside /var/lib/etcd/a/member"},
		{"backup dir containing the data dir", twoMembers + "agent:\n  backupDir: /var/lib\n",
			"spec.yaml:6: members[0]", "nor contain the data dir"},
		{"state dir inside the member dir", twoMembers + "agent:\n  stateDir: /var/lib/etcd/{name}/member/agent\n",
			"spec.yaml:6: members[0]", "must not be inside /var/lib/etcd/a/member"},
		{"tilde path", twoMembers + "etcd:\n  dataDir: ~/etcd/{name}\n",
			"spec.yaml:6: etcd.dataDir", "~ is not expanded"},
		{"misspelt placeholder", twoMembers + "agent:\n  stateDir: /srv/{nmae}\n",
			"spec.yaml:6: agent.stateDir", "unknown placeholder {nmae}"},
		{"agent.addr not host:port", twoMembers + "agent:\n  addr: localhost\n",
			"spec.yaml:6: agent.addr", "must be host:port"},
		{"leader tag misspelt", strings.Replace(twoMembers, "name: b,", "name: b, leader: never,", 1),
			"spec.yaml:4: members[1].leader", `"never": use prefer (move leadership to this member), avoid (move it off) or leave it out`},
		{"agentAddr bad port", strings.Replace(twoMembers, "name: b,", "name: b, agentAddr: 'x:y',", 1),
			"spec.yaml:4: members[1].agentAddr", "1 to 65535"},
		{"unknown top-level key", twoMembers + "repiar: {}\n",
			"spec.yaml:5: repiar", "unknown key: remove it or use one of agent, auth, backup, cluster, etcd, maintenance, members, repair, tls"},
		{"unknown member key", strings.Replace(twoMembers, "name: b,", "name: b, peerUrls: [],", 1),
			"spec.yaml:4: members[1].peerUrls", "did you mean peerURLs?"},
		{"repeated key", twoMembers + "agent: {}\nagent: {}\n",
			"spec.yaml:6: agent", "repeated key, first set at line 5"},
		{"merge key", twoMembers + "agent:\n  <<: {addr: ':1'}\n",
			"spec.yaml:6: agent", "merge keys"},
		{"string where a list goes", strings.Replace(twoMembers, "peerURLs: [http://10.0.0.2:2380]", "peerURLs: http://10.0.0.2:2380", 1),
			"spec.yaml:4: members[1].peerURLs", "must be a list"},
		{"not a mapping", "- a\n- b\n", "spec.yaml:1: the spec", "must be a mapping"},
		{"syntax error", twoMembers + "etcd:\n  dataDir: [oops\n", "spec.yaml:6: YAML syntax", "did not find expected"},
		{"syntax error on line 1", "cluster: {name: t", "spec.yaml:1: YAML syntax", "did not find expected"},
		{"syntax error at the end", "cluster: {name: t\n", "spec.yaml:1: YAML syntax", "did not find expected"},
		{"block mapping syntax error", "cluster:\n  name: t\n bad: 1\n", "spec.yaml:3: YAML syntax", "did not find expected key"},
		{"scanner error", twoMembers + "etcd:\n  dataDir: a: b\n", "spec.yaml:6: YAML syntax", "mapping values are not allowed"},
		{"tab indent", "cluster:\n\tname: t\n", "spec.yaml:2: YAML syntax", "cannot start any token"},
		{"unknown anchor", twoMembers + "etcd: *base\n", "spec.yaml:5: YAML syntax", "unknown anchor"},
		{"control character", twoMembers + "etcd: {dataDir: \"/x\x01\"}\n", "spec.yaml:5: YAML syntax", "control characters"},
		{"second document", twoMembers + "---\ncluster: {name: u}\n", "spec.yaml:5: a second YAML document", "one document"},
		{"unknown backup key", twoMembers + "backup:\n  intervall: 1h\n", "spec.yaml:6: backup.intervall", "unknown key: remove it or use one of dir, drillInterval, encryption, interval, keep, s3"},
		{"unknown s3 key", twoMembers + "backup:\n  s3:\n    endpoint: https://s3\n    bucket: b-1\n    credentialsFile: /c\n    pathStyle: true\n",
			"spec.yaml:10: backup.s3.pathStyle", "unknown key"},
		{"negative backup interval", twoMembers + "backup:\n  interval: -1h\n", "spec.yaml:6: backup.interval", "must be 0 (no scheduled snapshots) or more"},
		{"backup interval not a duration", twoMembers + "backup: {interval: hourly}\n", "spec.yaml:5: backup.interval", "is not a duration"},
		{"backup keep 0", twoMembers + "backup:\n  keep: 0\n", "spec.yaml:6: backup.keep", "must be at least 1"},
		{"backup dir placeholder", twoMembers + "backup:\n  dir: /b/{host}\n", "spec.yaml:6: backup.dir", "unknown placeholder {host}"},
		{"shared backup dir", twoLocal + "backup:\n  dir: /b\n", "spec.yaml:6: members[1]", "snapshot dir /b is also member a's: put {name} in backup.dir"},
		{"backup dir in the member dir", twoMembers + "etcd:\n  dataDir: /d/{name}\nbackup:\n  dir: /d/{name}/member/snaps\n",
			"spec.yaml:8: members[0]", "snapshot dir /d/a/member/snaps must not be inside /d/a/member"},
		{"s3 without endpoint", twoMembers + "backup:\n  s3:\n    bucket: b-1\n", "spec.yaml:6: backup.s3.endpoint", "missing"},
		{"s3 endpoint with a path", twoMembers + "backup:\n  s3:\n    endpoint: https://s3/bucket\n", "spec.yaml:7: backup.s3.endpoint", "nothing after it"},
		{"s3 endpoint scheme", twoMembers + "backup:\n  s3:\n    endpoint: s3.example.net\n", "spec.yaml:7: backup.s3.endpoint", "must be http:// or https://"},
		{"s3 bucket missing", twoMembers + "backup:\n  s3:\n    endpoint: https://s3\n", "spec.yaml:6: backup.s3.bucket", "missing"},
		{"s3 bucket name", twoMembers + "backup:\n  s3:\n    bucket: Etcd_Backups\n", "spec.yaml:7: backup.s3.bucket", "lowercase"},
		{"s3 prefix absolute", twoMembers + "backup:\n  s3:\n    prefix: /prod\n", "spec.yaml:7: backup.s3.prefix", "must not start with /"},
		{"s3 credentials missing", twoMembers + "backup:\n  s3:\n    endpoint: https://s3\n", "spec.yaml:6: backup.s3.credentialsFile", "missing"},
		{"s3 credentials unreadable", twoMembers + "backup:\n  s3:\n    credentialsFile: /nonexistent/s3\n", "spec.yaml:7: backup.s3.credentialsFile", "cannot read it"},
		{"s3 CA unreadable", twoMembers + "backup:\n  s3:\n    caFile: /nonexistent/ca.crt\n", "spec.yaml:7: backup.s3.caFile", "cannot read it"},
		{"s3 credentials per member", twoMembers + "backup:\n  s3:\n    credentialsFile: /c/{name}\n", "spec.yaml:7: backup.s3.credentialsFile", "{name} is not expanded here"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := parseErrors(t, tt.spec)
			for _, e := range errs {
				if line := e.Error(); strings.HasPrefix(line, tt.want) && strings.Contains(line, tt.msg) {
					return
				}
			}
			t.Errorf("no error starts with %q and contains %q; got:\n%v", tt.want, tt.msg, &errs)
		})
	}
}

// TestEtcdFlagsAccepted: etcd's own flags pass, the safe value of a
// guarded one passes, and with an external etcd binary (of another
// version, maybe) only the dangerous flags are checked.
func TestEtcdFlagsAccepted(t *testing.T) {
	for _, flags := range []string{
		"snapshot-count: 5\n    quota-backend-bytes: 8589934592\n    feature-gates: InitialCorruptCheck=true",
		"strict-reconfig-check: true",
		"--auto-compaction-retention: 1h\n    max-learners: 2",
		"v2-deprecation: write-only",
	} {
		if _, err := Parse([]byte(twoMembers+"etcd:\n  flags:\n    "+flags+"\n"), "spec.yaml"); err != nil {
			t.Errorf("flags %q: %v", flags, err)
		}
	}
	external := twoMembers + "etcd:\n  binary: /opt/etcd-3.6/etcd\n  flags:\n    experimental-initial-corrupt-check: true\n"
	if _, err := Parse([]byte(external), "spec.yaml"); err != nil {
		t.Errorf("an external etcd's own flag: %v", err)
	}
}

// TestAllErrorsAtOnce: an operator fixes the whole file in one pass.
func TestAllErrorsAtOnce(t *testing.T) {
	errs := parseErrors(t, `cluster: {name: "a b"}
members:
  - name: n1
    peerURLs: [htp://x:2380]
    clientURLs: []
  - name: n1
    peerURLs: [http://10.0.0.2:2380]
    clientURLs: [http://10.0.0.2:2379]
    color: blue
agent: {interval: 0s}
`)
	want := []string{
		`spec.yaml:1: cluster.name: "a b": use only letters, digits, '.', '_' and '-'`,
		`spec.yaml:4: members[0].peerURLs[0]: "htp://x:2380": scheme must be http or https, e.g. http://10.0.0.1:2380`,
		`spec.yaml:5: members[0].clientURLs: empty: list at least one URL, e.g. [http://10.0.0.1:2379]`,
		`spec.yaml:6: members[1].name: "n1": already used by member n1 (line 3): each member needs its own`,
		`spec.yaml:9: members[1].color: unknown key: remove it or use one of agentAddr, clientURLs, dataDir, flags, leader, listenClientURLs, listenPeerURLs, name, peerURLs`,
		`spec.yaml:10: agent.interval: 0s: must be more than 0, e.g. 2s`,
	}
	if got := (&errs).Error(); got != strings.Join(want, "\n") {
		t.Errorf("Error() =\n%s\nwant\n%s", got, strings.Join(want, "\n"))
	}
}

// TestSeparateHostsMayShareLayout: members on different hosts (distinct
// non-loopback peer hosts) may use one data dir path and bind 127.0.0.1,
// as every kubeadm control-plane host does; on one machine they may not.
func TestSeparateHostsMayShareLayout(t *testing.T) {
	const kubeadmLike = `cluster: {name: t}
members:
  - {name: a, peerURLs: [http://10.0.0.1:2380], clientURLs: [http://10.0.0.1:2379], listenClientURLs: [http://127.0.0.1:2379, http://10.0.0.1:2379]}
  - {name: b, peerURLs: [http://10.0.0.2:2380], clientURLs: [http://10.0.0.2:2379], listenClientURLs: [http://127.0.0.1:2379, http://10.0.0.2:2379]}
etcd:
  dataDir: /var/lib/etcd
agent:
  stateDir: /var/lib/etcdkeeper
`
	if _, err := Parse([]byte(kubeadmLike), "spec.yaml"); err != nil {
		t.Fatalf("members on separate hosts sharing paths and 127.0.0.1: %v", err)
	}
	local := strings.NewReplacer("10.0.0.1", "127.0.0.1", "10.0.0.2", "127.0.0.2", "http://127.0.0.1:2379, ", "").Replace(kubeadmLike)
	if _, err := Parse([]byte(local), "spec.yaml"); err == nil || !strings.Contains(err.Error(), "data dir /var/lib/etcd is also member a's") {
		t.Fatalf("members on one machine sharing a data dir: got %v", err)
	}
}

// TestMemberFlags: a member's own flags obey etcd.flags' rules, at their
// line, and override etcd.flags for that member only.
func TestMemberFlags(t *testing.T) {
	_, err := Parse([]byte(`cluster: {name: c}
members:
  - name: a
    peerURLs: [http://10.0.0.1:2380]
    clientURLs: [http://10.0.0.1:2379]
    flags:
      listen-metrics-urls: http://10.0.0.1:2381
      force-new-cluster: true
`), "spec.yaml")
	if err == nil || !strings.Contains(err.Error(), "spec.yaml:8: members[0].flags.force-new-cluster: remove it") {
		t.Fatalf("err = %v, want members[0].flags.force-new-cluster refused at line 8", err)
	}
}

// TestRecoveryAddr: agent.recoveryAddr takes orders that fence members
// and force a new cluster. Without tls.peer it is an error at its line
// that says what to do, unless recoveryInsecure: true says the operator
// means it (then a warning); a bad address is an error too.
func TestRecoveryAddr(t *testing.T) {
	// No backups: no warning about their encryption beside the one wanted.
	const members = "cluster: {name: c}\nmembers:\n  - {name: a, peerURLs: [http://10.0.0.1:2380], clientURLs: [http://10.0.0.1:2379]}\n"
	for _, tt := range []struct {
		name, agent string
		// err: the error's start (with its line) and a part of it; warn: a
		// part of the only warning ("": none).
		err, errPart, warn string
	}{
		{name: "not host:port", agent: "  recoveryAddr: nowhere\n", err: "spec.yaml:5: agent.recoveryAddr", errPart: "must be host:port"},
		{name: "without tls.peer", agent: "  recoveryAddr: ':2377'\n", err: `spec.yaml:5: agent.recoveryAddr ":2377" without tls.peer`,
			errPart: "set tls.peer (mutual TLS with the members' peer certificates), or, on a network only the members reach, add recoveryInsecure: true next to it"},
		{name: "without tls.peer, recoveryInsecure false", agent: "  recoveryAddr: ':2377'\n  recoveryInsecure: false\n", err: "spec.yaml:5: agent.recoveryAddr", errPart: "without tls.peer"},
		{name: "without tls.peer, recoveryInsecure: true", agent: "  recoveryAddr: ':2377'\n  recoveryInsecure: true\n", warn: "is plain HTTP (agent.recoveryInsecure)"},
		{name: "recoveryInsecure alone", agent: "  recoveryInsecure: true\n", warn: "agent.recoveryInsecure without agent.recoveryAddr: it has no effect"},
		{name: "neither", agent: "  interval: 1s\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse([]byte(members+"agent:\n"+tt.agent+"backup: {interval: 0s}\n"), "spec.yaml")
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || !strings.Contains(err.Error(), tt.errPart) {
					t.Fatalf("err = %v, want %q ... %q", err, tt.err, tt.errPart)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tt.warn == "" && len(s.Warnings) != 0:
				t.Errorf("warnings %v, want none", s.Warnings)
			case tt.warn != "" && (len(s.Warnings) != 1 || !strings.Contains(s.Warnings[0].Error(), tt.warn)):
				t.Errorf("warnings %v, want one with %q", s.Warnings, tt.warn)
			}
		})
	}
}

func TestLeaderTag(t *testing.T) {
	for _, tag := range []string{"prefer", "avoid"} {
		s, err := Parse([]byte(strings.Replace(twoMembers, "name: b,", "name: b, leader: "+tag+",", 1)), "spec.yaml")
		if err != nil {
			t.Fatalf("leader: %s: %v", tag, err)
		}
		if got := s.Members[1].Leader; got != tag {
			t.Errorf("leader: %s parsed as %q", tag, got)
		}
	}
}

// TestHostTurnTimeoutAgainstInterval: maintenance.hostTurnTimeout must be
// at least four of the holder agent's renewal periods: it renews at its
// passes, every agent.interval and every 5 s at least (the steady loop),
// so a shorter timeout would have the other agents release a live turn.
// The error points at the line to change and says what to give.
func TestHostTurnTimeoutAgainstInterval(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want string // the start of the error line ("": valid)
		msg  string
	}{
		{"the defaults", "", "", ""},
		{"20s, the default interval (2s, 5s steady)", "maintenance:\n  hostTurnTimeout: 20s\n", "", ""},
		{"15s, the default interval", "maintenance:\n  hostTurnTimeout: 15s\n",
			"spec.yaml:6: maintenance.hostTurnTimeout", "give at least 20s"},
		{"10s, the old floor", "maintenance:\n  hostTurnTimeout: 10s\n",
			"spec.yaml:6: maintenance.hostTurnTimeout", "give at least 20s"},
		{"1m with agent.interval 30s", "agent:\n  interval: 30s\nmaintenance:\n  hostTurnTimeout: 1m\n",
			"spec.yaml:8: maintenance.hostTurnTimeout", "give at least 2m0s, or an agent.interval of at most 15s"},
		{"2m with agent.interval 30s", "agent:\n  interval: 30s\nmaintenance:\n  hostTurnTimeout: 2m\n", "", ""},
		{"the default 15m with agent.interval 5m", "agent:\n  interval: 5m\n",
			"spec.yaml:6: agent.interval", "maintenance.hostTurnTimeout (15m0s, the default) must be at least 20m0s"},
		{"the default 15m with agent.interval 3m", "agent:\n  interval: 3m\n", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text := twoMembers + tt.yaml
			if tt.want == "" {
				if _, err := Parse([]byte(text), "spec.yaml"); err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			errs := parseErrors(t, text)
			for _, e := range errs {
				if line := e.Error(); strings.HasPrefix(line, tt.want) && strings.Contains(line, tt.msg) {
					return
				}
			}
			t.Errorf("no error starts with %q and contains %q; got:\n%v", tt.want, tt.msg, &errs)
		})
	}
}

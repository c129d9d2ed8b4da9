#!/usr/bin/env bash
# Reproduces etcd's publish stall with plain etcd and nothing else
# (docs/etcd-publish-stall.md): a 3-member cluster on loopback, 150 puts
# (more than the leader's in-memory snapshot interval of 100 entries, so a
# new member is sent a snapshot), then a learner is added and started,
# and the time until its client port serves is measured. Repeated RUNS
# times; each run prints one line, the last line the count.
#
#   ETCD=/path/to/etcd scripts/etcd-publish-stall.sh [RUNS]
#   ETCD="bin/etcdkeeper etcd" scripts/etcd-publish-stall.sh 20   # the etcd built into etcdkeeper
#
# Needs bash, curl, jq and base64. Uses 127.0.13.1-4 (IP=127.0.13), ports
# 2379/2380; WORK=dir keeps the members' logs there instead of a temp dir.
# VOTER=1 adds the new member as a voter instead of a learner.
#
# A run "stalled" when the new member's etcd logged "failed to publish
# local member to cluster through raft" (after its request timeout,
# 5 s + 2 × election timeout = 7 s by default). For each run the line
# shows:
#   ready      time from the start of the new etcd until its /health
#              answers (its client port serves only once it has published)
#   snap       the index of the snapshot it applied (the leader's applied
#              index when it sent it)
#   gap        time from "applied snapshot" to "published local member"
#   self-in-snapshot  whether, 100 ms after it applied the snapshot and
#              before it was ready, its own peer /members already listed
#              its client URLs: the membership restored from the snapshot
#              holds the attributes its pending publish proposes, i.e. the
#              publish entry was committed and applied by the leader before
#              it cut the snapshot.
set -euo pipefail

ETCD=${ETCD:-etcd}
RUNS=${1:-10}
IP=${IP:-127.0.13}
VOTER=${VOTER:-0}
read -r -a etcd_cmd <<<"$ETCD"

work=${WORK:-$(mktemp -d)}
mkdir -p "$work"
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	[ -n "${WORK:-}" ] || rm -rf "$work"
}
trap cleanup EXIT

now() { date +%s.%N; }
# ts_of FILE MSG: the "ts" of the first JSON log line whose msg is MSG,
# as seconds since the epoch.
ts_of() {
	local ts
	ts=$(grep -m1 "\"msg\":\"$2\"" "$1" | jq -r .ts 2>/dev/null) || true
	[ -n "$ts" ] && [ "$ts" != null ] && date -d "$ts" +%s.%N
}

start_member() { # name i state initial-cluster
	local name=$1 i=$2
	"${etcd_cmd[@]}" --name "$name" --data-dir "$run/$name" \
		--listen-peer-urls "http://$IP.$i:2380" --initial-advertise-peer-urls "http://$IP.$i:2380" \
		--listen-client-urls "http://$IP.$i:2379" --advertise-client-urls "http://$IP.$i:2379" \
		--initial-cluster-state "$3" --initial-cluster "$4" --initial-cluster-token stall \
		--logger zap --log-outputs stderr --log-level info 2>"$run/$name.log" &
	pids+=($!)
}

healthy() { curl -fs --max-time "${2:-0.2}" "http://$IP.$1:2379/health" | grep -q '"health":"true"'; }

stalls=0
for r in $(seq 1 "$RUNS"); do
	run=$work/run$r
	mkdir -p "$run"
	pids=()
	cluster="n1=http://$IP.1:2380,n2=http://$IP.2:2380,n3=http://$IP.3:2380"
	for i in 1 2 3; do start_member "n$i" "$i" new "$cluster"; done
	for _ in $(seq 1 100); do healthy 1 && healthy 2 && healthy 3 && break; sleep 0.1; done
	for k in $(seq 1 150); do
		curl -fs "http://$IP.1:2379/v3/kv/put" -d "{\"key\":\"$(printf 'k%03d' "$k" | base64)\",\"value\":\"$(printf 'v%03d' "$k" | base64)\"}" >/dev/null
	done
	# etcd refuses a member add until its leader has been connected to
	# every voter for 5 s.
	sleep 5.5
	learner=true
	[ "$VOTER" = 1 ] && learner=false
	curl -fs "http://$IP.1:2379/v3/cluster/member/add" -d "{\"peerURLs\":[\"http://$IP.4:2380\"],\"isLearner\":$learner}" >"$run/add.json"
	t0=$(now)
	start_member n4 4 existing "$cluster,n4=http://$IP.4:2380"
	self_in_snap=unknown
	checked=0
	while ! healthy 4 0.05; do
		if [ $checked = 0 ] && grep -q '"msg":"applied snapshot"' "$run/n4.log"; then
			sleep 0.1
			if ! healthy 4 0.05; then
				checked=1
				if curl -fs --max-time 0.5 "http://$IP.4:2380/members" | jq -e ".[] | select(.peerURLs[0] == \"http://$IP.4:2380\") | .clientURLs | length > 0" >/dev/null; then
					self_in_snap=yes
				else
					self_in_snap=no
				fi
			fi
		fi
		if [ "$(echo "$(now) - $t0 > 20" | bc)" = 1 ]; then echo "run $r: not ready after 20 s" >&2; break; fi
		sleep 0.01
	done
	ready=$(echo "$(now) - $t0" | bc)
	stalled=no
	if grep -q 'failed to publish local member' "$run/n4.log"; then stalled=yes; stalls=$((stalls + 1)); fi
	snap=$(grep -m1 '"msg":"applied snapshot"' "$run/n4.log" | jq -r '."incoming-leader-snapshot-index"' 2>/dev/null || echo none)
	a=$(ts_of "$run/n4.log" "applied snapshot" || true)
	p=$(ts_of "$run/n4.log" "published local member to cluster through raft" || true)
	gap=none
	[ -n "$a" ] && [ -n "$p" ] && gap=$(printf '%.4fs' "$(echo "$p - $a" | bc)")
	printf 'run %2d: stalled=%-3s ready=%6.2fs snap=%s gap=%s self-in-snapshot=%s\n' "$r" "$stalled" "$ready" "$snap" "$gap" "$self_in_snap"
	for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	[ -n "${WORK:-}" ] || rm -rf "$run"
done
echo "stalled in $stalls of $RUNS runs"

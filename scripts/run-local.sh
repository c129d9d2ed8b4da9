#!/usr/bin/env bash
# Runs a local 3-member etcd cluster: three etcdkeeper agents, one per
# loopback "host" (127.0.0.1, .2, .3), from examples/cluster.yaml, with
# data under examples/data/. Ctrl-C stops the agents, which stop etcd.
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=bin/etcdkeeper
SPEC=examples/cluster.yaml
DATA=examples/data
NAMES=(node1 node2 node3)

# The demo's snapshots are encrypted like a real cluster's: its age key
# pair is made on the first start (the spec reads the recipient from
# $DATA/backup.recipients, restores with $DATA/backup.key). Neither is
# writable by another user: the agent refuses such files.
install -d -m 0755 "$DATA"
if [[ ! -e "$DATA/backup.key" ]]; then
	if [[ -e "$DATA/backup.recipients" ]]; then
		echo "$DATA/backup.key is gone: a new demo key replaces it (older demo snapshots stay encrypted to the old one)"
	fi
	"$BIN" backup keygen --out "$DATA/backup.key" >"$DATA/backup.recipients.new"
	mv "$DATA/backup.recipients.new" "$DATA/backup.recipients"
	echo "made the demo's backup key: $DATA/backup.key (recipient $(cat "$DATA/backup.recipients"))"
elif [[ ! -s "$DATA/backup.recipients" ]]; then
	sed -n 's/^# public key: //p' "$DATA/backup.key" >"$DATA/backup.recipients"
fi
chmod 0644 "$DATA/backup.recipients"
"$BIN" validate --config "$SPEC"

pids=()
stop() {
	trap - INT TERM
	echo
	echo "stopping the agents (each stops its etcd)..."
	kill -TERM "${pids[@]}" 2>/dev/null || true
	wait "${pids[@]}" 2>/dev/null || true
	[[ -n "${tailpid:-}" ]] && kill "$tailpid" 2>/dev/null || true
	echo "stopped. Data is kept under $DATA/ (make clean removes it)."
	exit 0
}
trap stop INT TERM

start=$(date +%s.%N)
for n in "${NAMES[@]}"; do
	"$BIN" run --config "$SPEC" --name "$n" --log-format console >"$DATA/$n.log" 2>&1 &
	pids+=($!)
	echo "started agent $n (pid $!), log: $DATA/$n.log"
done

# Ready: status says every member is a healthy voter (exit 0) and every
# agent has published its record as running: a healthy cluster alone is
# not enough, an agent that has not yet looked since its etcd served
# shows as "starting" or "no agent" in the table.
ready() {
	local out
	out=$("$BIN" status --config "$SPEC" -o json 2>/dev/null) || return 1
	[[ $(grep -c '"agent": "running"' <<<"$out") -eq ${#NAMES[@]} ]]
}
echo "waiting for ${#NAMES[@]} healthy voters and their agents..."
for _ in $(seq 1 240); do
	if ready; then
		break
	fi
	sleep 0.25
done
end=$(date +%s.%N)
"$BIN" status --config "$SPEC" || true
printf "\ncluster healthy %s s after the agents started\n" "$(awk "BEGIN{printf \"%.1f\", $end-$start}")"

cat <<EOT

The cluster answers on http://127.0.0.1:2379, http://127.0.0.2:2379, http://127.0.0.3:2379
  status:          $BIN status --config $SPEC
  watch it heal:   kill -9 \$(cat $DATA/node2/state/etcd.pid)      # the agent restarts etcd
  corrupt + repair: see README.md ("Watch it heal")
Agent decisions follow (etcd's own log lines are in $DATA/<name>.log). Ctrl-C stops everything.

EOT
tail -q -n +1 -F "$DATA"/node*.log 2>/dev/null | grep --line-buffered -v -P '\tetcd\t' &
tailpid=$!
wait "${pids[@]}"

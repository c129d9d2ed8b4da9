#!/usr/bin/env bash
# shellcheck disable=SC2016 # single quotes hold dpkg-query formats and code run inside the hosts
# End-to-end test bed: three Debian 12 "hosts" (systemd-nspawn containers,
# systemd as PID 1) install etcdkeeper from its .deb, run it as the packaged
# systemd service and go through what real hosts go through: start, kill,
# corrupt WAL, spec reload, watchdog, power cycle, package remove/reinstall,
# a host cut off from the network for a minute, a package upgrade and
# certificate renewals on every host, and every host asking for a reboot
# at once (rebooted in turns).
#
#   test/e2e/run.sh dist/etcdkeeper_<version>_<arch>.deb [UPGRADE.deb]   (make e2e)
#
# UPGRADE.deb, a package of another version (make e2e builds one), is
# installed on all three hosts in the same second for the upgrade step;
# without it that step is skipped.
#
# Needs root, systemd-container (systemd-nspawn), debootstrap, curl, jq,
# iproute2. The run lives in network and mount namespaces of its own: there
# it makes the bridge e2ebr0 (198.18.3.1/15, the benchmarking range of RFC
# 2544; no route out), and each host has its own network namespace joined
# to it by a veth pair (systemd-nspawn --network-bridge: vb-<host> on the
# bridge, host0 inside, configured by the host's systemd-networkd) with the
# address 198.18.3.11, .12, .13 (ports 2378-2380). The test's curl reaches
# the hosts through the bridge, as a client on another machine would. Their
# Debian root is built once and cached (test/e2e/rootfs.sh, run in the
# network namespace run.sh was started in, for the mirror); each host boots
# from an overlay of it, so a run starts from clean hosts in seconds.
#
#   E2E_WORKDIR  where the hosts' overlays live (default /var/tmp/etcdkeeper-e2e)
#   E2E_KEEP=1   keep the hosts' files (not the containers) after a passing run
#   E2E_CACHE, E2E_MIRROR, E2E_REBUILD: see test/e2e/rootfs.sh
#
# Every step is named and timed; a failing step prints why and the journal
# of the host it failed on, and the run stops there. The containers, their
# mounts and cgroups are removed on every exit (trap), also on failure and
# Ctrl-C; the files of a failed run stay in E2E_WORKDIR until the next run.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
deb=${1:-}
upgrade_deb=${2:-}
[[ $(id -u) == 0 ]] || { echo "e2e: must run as root (it boots containers)" >&2; exit 1; }
[[ -n $deb && -f $deb ]] || { echo "usage: $0 path/to/etcdkeeper_<version>_<arch>.deb" >&2; exit 1; }
deb=$(realpath "$deb")
if [[ -n $upgrade_deb ]]; then
	[[ -f $upgrade_deb ]] || { echo "e2e: no upgrade package $upgrade_deb" >&2; exit 1; }
	upgrade_deb=$(realpath "$upgrade_deb")
fi

# Run in mount and network namespaces of our own: the overlay mounts and
# the bridge exist only there and vanish with the run even if it is killed
# with SIGKILL. Descriptor 7 keeps the network namespace we were started in
# (debootstrap needs the mirror).
if [[ -z ${E2E_PRIVATE_MOUNTS:-} ]]; then
	export E2E_PRIVATE_MOUNTS=1
	exec 7</proc/self/ns/net
	exec unshare --mount --net --propagation private -- "$0" "$deb" ${upgrade_deb:+"$upgrade_deb"}
fi

WORKBASE=${E2E_WORKDIR:-/var/tmp/etcdkeeper-e2e}
WORK=$WORKBASE/run
SPEC=/etc/etcdkeeper/cluster.yaml
# Where step 11 puts the certificates the agents renew.
PKI=/etc/etcdkeeper/pki
# Host i: machine and host name HOST[i], etcd member MEMBER[i], address IP[i].
# Host c's host name is not its member name: it names its member with the
# ExecStart drop-in the packaging README documents; a and b use the default
# (the host name).
HOST=(e2e-a e2e-b e2e-c-host)
MEMBER=(e2e-a e2e-b e2e-c)
IP=(198.18.3.11 198.18.3.12 198.18.3.13)
# Every host runs with this WatchdogSec drop-in across all the steps: a
# short one, as operators write them, must never kill a healthy agent.
WATCHDOG=${E2E_WATCHDOG:-3s}
# The bridge (in the run's own network namespace) and its address.
BRIDGE=e2ebr0
BRIDGE_IP=198.18.3.1
NETMASK=15
T0=$EPOCHREALTIME

# ---------------------------------------------------------------- output

ts() { date +%T; }
log() { printf '%s   %s\n' "$(ts)" "$*"; }
hr() { printf '%s\n' "------------------------------------------------------------------------"; }

# fail [-h HOST] MESSAGE: fails the current step; the journal of HOST (or
# of every host when none is named) is printed.
fail() {
	local host=
	if [[ ${1:-} == -h ]]; then
		host=$2
		shift 2
	fi
	printf '%s   FAIL: %s\n' "$(ts)" "$*" >&2
	[[ -n $host ]] && echo "$host" >>"$WORK/failed-hosts"
	exit 1
}

# ---------------------------------------------------------------- steps

STEP_NAMES=()
STEP_RESULTS=()
STEP_SECS=()
FAILED=
STEP_PID=
STEP_T=

# step NAME FUNCTION [ARGS]: runs FUNCTION in a subshell with errexit
# (so any failing command fails the step), times it, records the result.
# After a failure the remaining steps are skipped. The subshell runs in the
# background and is waited for, so that SIGINT/SIGTERM reach the trap at
# once (it then stops the step and cleans up).
step() {
	local name=$1
	shift
	STEP_NAMES+=("$name")
	if [[ -n $FAILED ]]; then
		STEP_RESULTS+=(SKIP)
		STEP_SECS+=(-)
		return 0
	fi
	hr
	printf '%s ==> %s\n' "$(ts)" "$name"
	rm -f "$WORK/failed-hosts"
	local t=$EPOCHREALTIME rc
	STEP_T=$t
	set +e
	(
		set -eE
		# A command that fails without a fail line says which it was.
		trap 'echo "e2e: $name: line $LINENO: exit $?: $BASH_COMMAND" >&2' ERR
		"$@"
	) &
	STEP_PID=$!
	wait "$STEP_PID"
	rc=$?
	STEP_PID=
	set -e
	local secs
	secs=$(elapsed "$t")
	STEP_SECS+=("$secs")
	if ((rc == 0)); then
		STEP_RESULTS+=(PASS)
		printf '%s <== PASS %s (%ss)\n' "$(ts)" "$name" "$secs"
		return 0
	fi
	STEP_RESULTS+=(FAIL)
	FAILED=$name
	printf '%s <== FAIL %s (%ss)\n' "$(ts)" "$name" "$secs" >&2
	local hosts h
	if [[ -s $WORK/failed-hosts ]]; then
		hosts=$(sort -u "$WORK/failed-hosts")
	else
		hosts=${HOST[*]}
	fi
	for h in $hosts; do
		print_journal "$h"
	done
}

elapsed() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }

summary() {
	hr
	echo "e2e summary (deb: $(basename "$deb"))"
	printf '  %-52s %-6s %8s\n' STEP RESULT SECONDS
	local i
	for i in "${!STEP_NAMES[@]}"; do
		printf '  %-52s %-6s %8s\n' "${STEP_NAMES[$i]}" "${STEP_RESULTS[$i]:-?}" "${STEP_SECS[$i]:-?}"
	done
	printf '  %-52s %-6s %8s\n' total "$([[ -z $FAILED ]] && echo PASS || echo FAIL)" "$(elapsed "$T0")"
	hr
}

# ---------------------------------------------------------------- hosts

# A step whose run.sh was killed (SIGKILL: no trap) must not go on
# acting on the hosts, which a later run may have made again.
MAIN_PID=$$
orphan_guard() {
	kill -0 "$MAIN_PID" 2>/dev/null || {
		echo "e2e: run.sh ($MAIN_PID) is gone: stopping this step" >&2
		exit 1
	}
}

hdir() { echo "$WORK/hosts/$1"; }
idx() {
	local i
	for i in "${!HOST[@]}"; do
		[[ ${HOST[$i]} == "$1" ]] && { echo "$i"; return 0; }
	done
	echo "unknown host $1" >&2
	return 1
}
member() { echo "${MEMBER[$(idx "$1")]}"; }
# ip HOST: HOST's address (the iproute2 command is `command ip`).
ip() { echo "${IP[$(idx "$1")]}"; }

nspawn_pid() { cat "$(hdir "$1")/nspawn.pid" 2>/dev/null; }
# The container's PID 1 (systemd), as seen from here: nspawn's only child.
pid1() { ps -o pid= --ppid "$(nspawn_pid "$1")" 2>/dev/null | tr -d ' ' | head -n1; }
running() {
	local p
	p=$(nspawn_pid "$1") && [[ -n $p ]] && kill -0 "$p" 2>/dev/null
}

# on HOST CMD...: runs CMD inside HOST (all its namespaces), clean
# environment, with a deadline (E2E_CMD_TIMEOUT seconds, default 60).
on() {
	local h=$1 p
	shift
	orphan_guard
	p=$(pid1 "$h")
	[[ -n $p ]] || { echo "$h: not running" >&2; return 1; }
	timeout -k 5 "${E2E_CMD_TIMEOUT:-60}" nsenter -t "$p" -a -- \
		env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 TERM=dumb \
		SYSTEMD_PAGER=cat SYSTEMD_COLORS=0 SYSTEMD_LESS= "$@"
}
sctl() {
	local h=$1
	shift
	on "$h" systemctl --no-pager "$@"
}
prop() { sctl "$1" show -p "$2" --value etcdkeeper.service; }

# The unit's journal, read from the host's journal files (works whether
# the container is up or not).
journal() {
	local h=$1
	shift
	journalctl -D "$(hdir "$h")/root/var/log/journal" --no-pager -u etcdkeeper.service "$@"
}
print_journal() {
	local h=$1 outside
	[[ -d $(hdir "$h")/root/var/log/journal ]] || return 0
	echo "----- journal of $h: journalctl -u etcdkeeper -p info (last 150 lines) -----" >&2
	journal "$h" -p info -o short-precise 2>&1 | tail -n 150 >&2 || true
	echo "----- end of journal of $h -----" >&2
	# The agent stops by itself only on SIGTERM/SIGINT. STOPPING=1 while
	# the unit was running (no stop job) means the signal came from
	# outside systemd: on a shared machine, e.g. a `pkill etcdkeeper` run
	# on the host, which sees (and kills) the containers' processes too.
	outside=$(journalctl -D "$(hdir "$h")/root/var/log/journal" --no-pager -o short-precise _PID=1 2>/dev/null |
		grep -E 'etcdkeeper.service: (Got notification message from PID [0-9]+ \(STOPPING=1\)|Changed [a-z-]+ -> [a-z-]+)' |
		awk '/STOPPING=1/ { s = $0; next } s && /Changed running -> stop-sigterm/ { print s } { s = "" }')
	if [[ -n $outside ]]; then
		echo "NOTE: on $h the agent was stopped by a signal that did not come from systemd (no stop job):" >&2
		printf '%s\n' "$outside" | sed 's/^/      /' >&2
		echo "      Something outside the test (e.g. pkill/killall etcdkeeper on this machine) killed it." >&2
	fi
}

# A cursor for "the journal from now on" inside HOST: the journal's last
# entry when it is taken.
cursor() { on "$1" journalctl -n 0 --show-cursor --no-pager | sed -n 's/^-- cursor: //p'; }
# journal_since HOST CURSOR [journalctl args]: the entries from CURSOR on
# (--cursor: its own entry too, one from before the step's action).
# Not --after-cursor: Debian 12's journalctl (252) with a match (-u,
# _PID=) skips two entries after seeking, taking the cursor's own for
# the first, and so drops the first matching entry when the cursor's
# does not match, e.g. the agent's "spec applied" when the spec file
# watch applies it before anything else of the unit is logged.
journal_since() {
	local h=$1 c=$2
	shift 2
	on "$h" journalctl --no-pager --cursor="$c" "$@"
}

# wait_for SECONDS WHAT CMD...: runs CMD every second until it succeeds;
# after SECONDS fails with WHAT and CMD's last output.
wait_for() {
	local limit=$1 what=$2
	shift 2
	local deadline=$((SECONDS + limit)) out
	while :; do
		orphan_guard
		if out=$("$@" 2>&1); then
			[[ -n $out ]] && printf '%s\n' "$out" | sed 's/^/      /'
			return 0
		fi
		if ((SECONDS >= deadline)); then
			echo "timed out after ${limit}s waiting for: $what" >&2
			[[ -n $out ]] && printf '%s\n' "$out" | tail -n 25 | sed 's/^/      last check: /' >&2
			return 1
		fi
		sleep 1
	done
}

# ---------------------------------------------------------------- agent, etcd

# The agent's /status (JSON) of HOST, from its agentAddr.
agent_status() { curl -sf --max-time 3 "http://$(ip "$1"):2378/status"; }
agent_field() { agent_status "$1" | jq -r ".$2"; }
etcd_pid() { on "$1" cat "/var/lib/etcdkeeper/$(member "$1")/etcd.pid"; }

# member_healthy HOST [ID]: the agent says its member is a healthy voter
# (and has member ID ID, when given).
member_healthy() {
	local h=$1 want=${2:-} st
	st=$(agent_status "$h") || { echo "$h: agent endpoint does not answer"; return 1; }
	if ! jq -e '.healthy and (.isLearner | not) and .phase == "running"' <<<"$st" >/dev/null; then
		jq -r '"\(.member): phase \(.phase), healthy \(.healthy), learner \(.isLearner): \(.decision)"' <<<"$st"
		return 1
	fi
	if [[ -n $want ]] && [[ $(jq -r .memberID <<<"$st") != "$want" ]]; then
		echo "$h: member ID is $(jq -r .memberID <<<"$st"), want $want"
		return 1
	fi
	jq -r '"\(.member): member \(.memberID) \(.role), healthy"' <<<"$st"
}

# converged VIA: `etcdkeeper status` run on host VIA says every spec member
# is a healthy voter and nothing else is in the cluster (exit 0).
converged() { on "$1" etcdkeeper status --config "$SPEC"; }

# all_healthy: 3 healthy voters, seen by every running agent and by
# `etcdkeeper status` on the first running host.
all_healthy() {
	local h via=
	for h in "${HOST[@]}"; do
		running "$h" || continue
		[[ -n $via ]] || via=$h
		agent_status "$h" | jq -e '.healthyVoters == 3 and .voters == 3' >/dev/null ||
			{ echo "$h: agent sees $(agent_status "$h" | jq -r '"\(.healthyVoters)/\(.voters) healthy voters"' 2>/dev/null || echo nothing)"; return 1; }
	done
	converged "$via"
}

wait_all_healthy() { wait_for "${1:-90}" "3 healthy voters (etcdkeeper status exit 0, every agent 3/3)" all_healthy; }

# status_says_healthy HOST: STATUS= (systemctl status) says 3/3 healthy.
status_says_healthy() {
	local st
	st=$(prop "$1" StatusText)
	[[ $st =~ ^$(member "$1"):\ (leader|voter),\ healthy\;\ leader\ .+\;\ 3/3\ healthy$ ]] || { echo "STATUS=$st"; return 1; }
}
# etcd_restarted HOST OLDPID ID: a new etcd runs, the member is ID, healthy.
etcd_restarted() {
	local p
	p=$(etcd_pid "$1") || return 1
	[[ $p != "$2" ]] || { echo "etcd.pid still $2"; return 1; }
	member_healthy "$1" "$3"
}
# unit_restarted HOST N ID: NRestarts > N, unit active, member ID healthy.
unit_restarted() {
	local n
	n=$(prop "$1" NRestarts)
	((n > $2)) || { echo "NRestarts $n"; return 1; }
	[[ $(prop "$1" ActiveState) == active ]] || { echo "unit $(prop "$1" ActiveState)"; return 1; }
	[[ -z ${3:-} ]] || member_healthy "$1" "$3"
}
# new_member HOST OLDID: a healthy voter whose ID is not OLDID.
new_member() {
	local st
	st=$(agent_status "$1") || { echo "agent does not answer"; return 1; }
	jq -e --arg old "$2" '.healthy and (.isLearner | not) and .memberID != $old and .memberID != null' <<<"$st" >/dev/null ||
		{ jq -r '"phase \(.phase), member \(.memberID), healthy \(.healthy): \(.decision)"' <<<"$st"; return 1; }
}
# etcd_procs HOST: PIDs of processes of user etcd inside HOST.
etcd_procs() {
	on "$1" sh -c 'u=$(id -u etcd); for p in /proc/[0-9]*; do [ "$(stat -c %u "$p" 2>/dev/null)" = "$u" ] && echo "${p#/proc/}"; done; true'
}
# reload_notified HOST CURSOR MAINPID: after CURSOR, systemd got the reload
# job, then RELOADING=1, then READY=1 from the agent.
reload_notified() {
	journal_since "$1" "$2" -o cat _PID=1 |
		grep -E "etcdkeeper.service: (Trying to enqueue job etcdkeeper.service/reload|Got notification message from PID $3 \((RELOADING|READY)=1)" |
		awk '/job etcdkeeper.service\/reload/ { j = 1 } /RELOADING=1/ && j { r = 1 } /READY=1/ && r { ok = 1 } END { exit !ok }'
}
spec_applied() { journal_since "$1" "$2" -u etcdkeeper -o cat | grep -F '"msg":"spec applied"'; }
# etcd_has_flag FLAG: every host's etcd runs with FLAG.
etcd_has_flag() {
	local h e
	for h in "${HOST[@]}"; do
		e=$(etcd_pid "$h") || { echo "$h: no etcd.pid"; return 1; }
		[[ $(on "$h" cat "/proc/$e/cmdline" | tr '\0' ' ') == *" $1 "* ]] || { echo "$h: etcd $e runs without $1"; return 1; }
	done
}
others_see_down() { agent_status "$1" | jq -e '.healthyVoters == 2' >/dev/null; }
# reachable HOST: a TCP connect to a port nobody listens on is refused at
# once when HOST's address is reachable, and times out when it is cut off.
reachable() {
	local out
	out=$(timeout 2 bash -c "exec 3<>/dev/tcp/$(ip "$1")/1" 2>&1) && return 0
	[[ $out == *"Connection refused"* ]]
}
exited() { ! kill -0 "$1" 2>/dev/null; }

b64() { printf '%s' "$1" | base64 -w0; }
unb64() { base64 -d <<<"$1"; }
etcd_put() {
	curl -sf --max-time 5 -X POST "http://$1:2379/v3/kv/put" \
		-d "{\"key\":\"$(b64 "$2")\",\"value\":\"$(b64 "$3")\"}" >/dev/null
}
# etcd_get IP KEY: the value, read from that member alone (serializable).
etcd_get() {
	curl -sf --max-time 5 -X POST "http://$1:2379/v3/kv/range" \
		-d "{\"key\":\"$(b64 "$2")\",\"serializable\":true}" | jq -r '.kvs[0].value // empty' | base64 -d
}
# etcd_count IP: how many e2e/ keys that member holds (serializable).
etcd_count() {
	curl -sf --max-time 5 -X POST "http://$1:2379/v3/kv/range" \
		-d "{\"key\":\"$(b64 e2e/)\",\"range_end\":\"$(b64 e2e0)\",\"count_only\":true,\"serializable\":true}" |
		jq -r '.count // "0"'
}
# etcd_read IP KEY: a linearizable read through that member succeeds.
etcd_read() {
	curl -sf --max-time 5 -X POST "http://$1:2379/v3/kv/range" -d "{\"key\":\"$(b64 "$2")\"}" >/dev/null
}
# etcd_count_range IP KEY END: how many keys in [KEY, END) that member
# holds (serializable: its own copy, not the leader's).
etcd_count_range() {
	curl -sf --max-time 5 -X POST "http://$1:2379/v3/kv/range" \
		-d "{\"key\":\"$(b64 "$2")\",\"range_end\":\"$(b64 "$3")\",\"count_only\":true,\"serializable\":true}" |
		jq -r '.count // "0"'
}
NKEYS=100
value_of() { printf 'value-%03d-%s' "$1" "$(printf 'x%.0s' {1..500})"; }
has_all_keys() {
	local n
	n=$(etcd_count "$1") || { echo "$1: range failed"; return 1; }
	[[ $n == "$NKEYS" ]] || { echo "$1 holds $n of $NKEYS e2e/ keys"; return 1; }
	[[ $(etcd_get "$1" e2e/k042) == "$(value_of 42)" ]] || { echo "$1: e2e/k042 has the wrong value"; return 1; }
	echo "$1 holds all $NKEYS keys, e2e/k042 intact"
}

# Per-run facts passed between steps (steps run in subshells).
put() { printf '%s\n' "$2" >"$WORK/state/$1"; }
get() { cat "$WORK/state/$1"; }

spec_yaml() {
	cat <<EOF
# etcdkeeper e2e test bed: one spec for all three hosts.
cluster:
  name: e2e
members:
  - name: ${MEMBER[0]}
    peerURLs: [http://${IP[0]}:2380]
    clientURLs: [http://${IP[0]}:2379]
    agentAddr: ${IP[0]}:2378
  - name: ${MEMBER[1]}
    peerURLs: [http://${IP[1]}:2380]
    clientURLs: [http://${IP[1]}:2379]
    agentAddr: ${IP[1]}:2378
  - name: ${MEMBER[2]}
    peerURLs: [http://${IP[2]}:2380]
    clientURLs: [http://${IP[2]}:2379]
    agentAddr: ${IP[2]}:2378
agent:
  interval: 1s
EOF
	if [[ " $* " == *" reloaded "* ]]; then
		cat <<EOF
etcd:
  flags:
    snapshot-count: "5000"
EOF
	fi
	if [[ " $* " == *" certs "* ]]; then
		cat <<EOF
tls:
  ca:
    certFile: $PKI/ca.crt
    keyFile: $PKI/ca.key
  renew:
    others:
      - name: e2e-client
        certFile: $PKI/e2e-client.crt
        keyFile: $PKI/e2e-client.key
EOF
	fi
}

# ---------------------------------------------------------------- containers

# The cgroup hierarchies to give each container a cgroup of its own. Two
# containers in one cgroup share it, and each one's systemd then kills the
# other's services.
cgroup_roots() {
	local d
	if [[ $(stat -fc %T /sys/fs/cgroup 2>/dev/null) == cgroup2fs ]]; then
		echo /sys/fs/cgroup
		return
	fi
	for d in /sys/fs/cgroup/systemd /sys/fs/cgroup/unified; do
		case $(stat -fc %T "$d" 2>/dev/null) in cgroup2fs | cgroupfs) echo "$d" ;; esac
	done
}

# make_host HOST: an overlay of the cached root (a copy where overlayfs
# does not work), with its own host name and machine ID, and the .deb.
make_host() {
	local h=$1 d
	d=$(hdir "$h")
	mkdir -p "$d/upper" "$d/work" "$d/root"
	if ! mount -t overlay overlay -o "lowerdir=$ROOTFS,upperdir=$d/upper,workdir=$d/work" "$d/root" 2>"$d/mount.err"; then
		log "$h: overlayfs not available here ($(cat "$d/mount.err")): copying the root instead"
		rm -rf "$d/root"
		cp -a --reflink=auto "$ROOTFS" "$d/root"
	fi
	echo "$h" >"$d/root/etc/hostname"
	printf '127.0.0.1\tlocalhost\n127.0.1.1\t%s\n::1\tlocalhost ip6-localhost ip6-loopback\n' "$h" >"$d/root/etc/hosts"
	tr -d '-' </proc/sys/kernel/random/uuid >"$d/root/etc/machine-id"
	cp "$deb" "$d/root/root/$(basename "$deb")"
	[[ -z $upgrade_deb ]] || cp "$upgrade_deb" "$d/root/root/upgrade.deb"
	# The host's end of its veth (host0) gets its address from the host's
	# own systemd-networkd at every boot, before network-online.target
	# (which etcdkeeper.service waits for). No gateway: nothing routed out.
	# The address stays when the link loses its carrier.
	mkdir -p "$d/root/etc/systemd/network"
	cat >"$d/root/etc/systemd/network/10-e2e-host0.network" <<EOF
[Match]
Name=host0

[Network]
Address=$(ip "$h")/$NETMASK
LinkLocalAddressing=no
IPv6AcceptRA=no
ConfigureWithoutCarrier=yes
IgnoreCarrierLoss=yes
EOF
	local u
	for u in multi-user.target.wants/systemd-networkd.service sockets.target.wants/systemd-networkd.socket \
		network-online.target.wants/systemd-networkd-wait-online.service; do
		mkdir -p "$d/root/etc/systemd/system/$(dirname "$u")"
		ln -sf "/lib/systemd/system/$(basename "$u")" "$d/root/etc/systemd/system/$u"
	done
	ln -sf /lib/systemd/system/systemd-networkd.service "$d/root/etc/systemd/system/dbus-org.freedesktop.network1.service"
}

# veth HOST: the bridge's end of HOST's veth pair (nspawn names it
# vb-<machine>, cut to 15 characters).
veth() { local v="vb-$1"; echo "${v:0:15}"; }

# make_bridge: the bridge in the run's network namespace, with the test's
# own address on it.
make_bridge() {
	command ip link set lo up
	command ip link add "$BRIDGE" type bridge
	command ip addr add "$BRIDGE_IP/$NETMASK" dev "$BRIDGE"
	command ip link set "$BRIDGE" up
}

# boot HOST: boots the container (again) and waits until its systemd says
# the system is running.
boot() {
	local h=$1 d cg
	d=$(hdir "$h")
	running "$h" && fail -h "$h" "$h is already running"
	local cgs=()
	mapfile -t cgs < <(cgroup_roots)
	for cg in "${cgs[@]}"; do
		mkdir -p "$cg/etcdkeeper-e2e/$h"
	done
	(
		for cg in "${cgs[@]}"; do
			echo "$BASHPID" >"$cg/etcdkeeper-e2e/$h/cgroup.procs"
		done
		# --register=no --keep-unit: this machine has no systemd (or
		# machined) of its own to register with. --network-bridge: a
		# network namespace of its own, joined to the run's bridge by a
		# veth pair. 8>&-: the container must not hold the run's lock
		# (7>&-: nor the outer network namespace).
		# A reboot inside the container ends nspawn with 133: the host
		# boots again, as a real one would (step 12). nspawn.pid follows;
		# loop.pid is this loop, which cleanup stops first.
		local rc
		while :; do
			systemd-nspawn --quiet --register=no --keep-unit --link-journal=no \
				--network-bridge="$BRIDGE" \
				--console=read-only --machine="$h" --directory="$d/root" --boot 7>&- 8>&- &
			echo $! >"$d/nspawn.pid"
			rc=0
			wait $! || rc=$?
			((rc == 133)) || exit "$rc"
			echo "$(date +%T.%N) $h rebooted" >>"$d/reboots"
		done
	) >>"$d/console.log" 2>&1 </dev/null &
	echo $! >"$d/loop.pid"
	wait_for 30 "$h: container PID 1" pid1 "$h" >/dev/null || fail -h "$h" "$h: systemd-nspawn did not start (console: $d/console.log)"
	# systemctl talks to systemd through its private socket: it is there
	# a moment after PID 1 starts ("Failed to connect to bus" before).
	wait_for 30 "$h: systemd's private socket" on "$h" test -S /run/systemd/private >/dev/null ||
		fail -h "$h" "$h: systemd made no /run/systemd/private"
	local state
	state=$(E2E_CMD_TIMEOUT=90 on "$h" systemctl is-system-running --wait) || true
	if [[ $state != running ]]; then
		on "$h" systemctl --no-pager --failed || true
		tail -n 30 "$d/console.log" >&2 || true
		fail -h "$h" "$h: systemctl is-system-running says '${state:-nothing}' after boot (want running)"
	fi
	# systemd's debug log shows each sd_notify message a unit sends and
	# each state change: the checks read READY/RELOADING from it.
	on "$h" systemd-analyze log-level debug
	local addr
	addr=$(nsenter -t "$(pid1 "$h")" -n ip -4 -o addr show dev host0 | awk '{print $4}')
	[[ $addr == "$(ip "$h")/$NETMASK" ]] || fail -h "$h" "$h: host0 has the address '$addr', want $(ip "$h")/$NETMASK"
	reachable "$h" || fail -h "$h" "$h: $(ip "$h") cannot be reached through the bridge"
	log "$h: host0 $addr, on the bridge as $(veth "$h")"
	log "$h: booted (nspawn pid $(nspawn_pid "$h"), PID 1 = $(pid1 "$h")): $state"
}

# power_off HOST: a clean shutdown from inside, then waits for nspawn to exit.
power_off() {
	local h=$1 p
	p=$(nspawn_pid "$h")
	on "$h" systemctl poweroff --no-block || true
	wait_for 90 "$h: container powered off" exited "$p" || fail -h "$h" "$h did not power off within 90s"
	rm -f "$(hdir "$h")/nspawn.pid"
	rm_cgroups "$h"
}

rm_cgroups() {
	local cg h=$1
	for cg in $(cgroup_roots); do
		[[ -d $cg/etcdkeeper-e2e/$h ]] || continue
		for _ in 1 2 3 4 5; do
			find "$cg/etcdkeeper-e2e/$h" -depth -type d -exec rmdir {} + 2>/dev/null && break
			sleep 0.5
		done
		rmdir "$cg/etcdkeeper-e2e" 2>/dev/null || true
	done
}

# cleanup: stop every container this run (or a killed earlier run) started,
# by the PIDs recorded in WORK, unmount, remove the cgroups.
cleanup() {
	local h d p p1 pids=()
	for d in "$WORK"/hosts/*/; do
		[[ -d $d ]] || continue
		# The boot loop first: no host boots again behind the cleanup.
		p=$(cat "$d/loop.pid" 2>/dev/null) && kill -TERM "$p" 2>/dev/null
		rm -f "$d/loop.pid"
	done
	for d in "$WORK"/hosts/*/; do
		[[ -d $d ]] || continue
		h=$(basename "$d")
		p=$(cat "$d/nspawn.pid" 2>/dev/null) || continue
		# Only our own nspawn: the PID may have been reused since.
		if [[ -n $p && $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null) == *systemd-nspawn*" --directory=${d}root "* ]]; then
			p1=$(ps -o pid= --ppid "$p" | tr -d ' ' | head -n1)
			# SIGRTMIN+4 asks systemd for a clean poweroff.
			[[ -n $p1 ]] && kill -s RTMIN+4 "$p1" 2>/dev/null
			pids+=("$p:$p1:$h")
		fi
	done
	local deadline=$((SECONDS + 30)) e alive
	while ((${#pids[@]})) && ((SECONDS < deadline)); do
		alive=0
		for e in "${pids[@]}"; do kill -0 "${e%%:*}" 2>/dev/null && alive=1; done
		((alive)) || break
		sleep 0.5
	done
	for e in "${pids[@]}"; do
		p=${e%%:*}
		p1=${e#*:}
		p1=${p1%%:*}
		if kill -0 "$p" 2>/dev/null; then
			echo "cleanup: ${e##*:} did not power off within 30s: killing it" >&2
			# SIGKILL to a PID namespace's init kills the whole namespace.
			[[ -n $p1 ]] && kill -KILL "$p1" 2>/dev/null
			kill -KILL "$p" 2>/dev/null
		fi
	done
	for e in "${pids[@]}"; do
		p=${e%%:*}
		for _ in $(seq 20); do kill -0 "$p" 2>/dev/null || break; sleep 0.25; done
	done
	for d in "$WORK"/hosts/*/; do
		[[ -d $d ]] || continue
		h=$(basename "$d")
		rm -f "$d/nspawn.pid"
		mountpoint -q "$d/root" && { umount "$d/root" 2>/dev/null || umount -l "$d/root"; }
		rm_cgroups "$h"
		# nspawn leaves this behind when /run is not a tmpfs.
		rm -rf "/run/systemd/nspawn/propagate/$h"
	done
}

on_exit() {
	local rc=$?
	trap - EXIT INT TERM
	set +e
	if [[ -n $STEP_PID ]]; then
		# Interrupted in the middle of a step: stop it first.
		FAILED="${STEP_NAMES[-1]} (interrupted)"
		STEP_RESULTS+=(STOP)
		STEP_SECS+=("$(elapsed "$STEP_T")")
		kill -TERM "$STEP_PID" 2>/dev/null
		wait "$STEP_PID" 2>/dev/null
		echo "e2e: interrupted (signal) during step '${STEP_NAMES[-1]}'" >&2
	fi
	cleanup
	if [[ ${#STEP_NAMES[@]} -gt 0 ]]; then
		summary
	fi
	if [[ -z $FAILED && $rc == 0 ]]; then
		[[ ${E2E_KEEP:-} == 1 ]] || rm -rf "$WORK"
		echo "e2e: PASS"
	else
		[[ -n $FAILED ]] && echo "e2e: FAIL at step '$FAILED'" >&2
		echo "e2e: files of this run (console logs, journals, data) kept in $WORK" >&2
		((rc)) || rc=1
	fi
	exit "$rc"
}

# ================================================================ the steps

s_preflight() {
	local c pkg
	for c in systemd-nspawn:systemd-container debootstrap:debootstrap journalctl:systemd curl:curl jq:jq \
		ps:procps ip:iproute2 nsenter:util-linux unshare:util-linux flock:util-linux cmp:diffutils timeout:coreutils; do
		pkg=${c#*:}
		c=${c%%:*}
		type -P "$c" >/dev/null || fail "$c is not installed: apt-get install $pkg (the e2e needs systemd-container debootstrap curl jq procps iproute2)"
	done
	# The run's own network namespace holds only its loopback and bridge.
	local links
	links=$(command ip -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | tr '\n' ' ')
	[[ $links == "lo $BRIDGE " ]] || fail "the run's network namespace holds more than lo and $BRIDGE: $links"
	[[ -z $(command ip route show default) ]] || fail "the run's network namespace has a default route"
	log "network: $BRIDGE $BRIDGE_IP/$NETMASK in the run's own network namespace, no route out; hosts ${IP[*]}"
	log "deb: $deb ($(du -h "$deb" | cut -f1))"
	log "cgroups: $(cgroup_roots | tr '\n' ' ')"
}

s_root() {
	local r
	# In the network namespace run.sh was started in: building the root
	# needs the Debian mirror.
	r=$(nsenter --net=/proc/self/fd/7 -- "$here/rootfs.sh") || fail "could not build or find the Debian root (see above)"
	echo "$r" >"$WORK/rootfs"
}

s_boot() {
	local h
	for h in "${HOST[@]}"; do make_host "$h"; done
	for h in "${HOST[@]}"; do boot "$h"; done
}

s_install() {
	local h m spec
	spec=$(mktemp)
	spec_yaml >"$spec"
	for h in "${HOST[@]}"; do
		m=$(member "$h")
		on "$h" dpkg -i "/root/$(basename "$deb")" 2>&1 | sed "s/^/      $h: /" || fail -h "$h" "$h: dpkg -i failed"
		# The package must not start (or enable) anything by itself.
		[[ $(sctl "$h" is-active etcdkeeper || true) == inactive ]] || fail -h "$h" "$h: etcdkeeper runs right after install"
		[[ $(sctl "$h" is-enabled etcdkeeper || true) == disabled ]] || fail -h "$h" "$h: etcdkeeper is enabled by the install"
		on "$h" sh -c "cat >$SPEC" <"$spec"
		on "$h" sh -c "mkdir -p /etc/systemd/system/etcdkeeper.service.d && printf '[Service]\nWatchdogSec=$WATCHDOG\n' >/etc/systemd/system/etcdkeeper.service.d/e2e-watchdog.conf"
		sctl "$h" daemon-reload
		on "$h" etcdkeeper validate --config "$SPEC" >/dev/null || fail -h "$h" "$h: etcdkeeper validate rejects the spec"
		if [[ $m != "$h" ]]; then
			# The README's drop-in for a member not named like its host.
			on "$h" sh -c "mkdir -p /etc/systemd/system/etcdkeeper.service.d && cat >/etc/systemd/system/etcdkeeper.service.d/name.conf" <<EOF
[Service]
ExecStart=
ExecStart=/usr/bin/etcdkeeper run --config $SPEC --name $m
EOF
			sctl "$h" daemon-reload
			log "$h: member name $m from a drop-in (host name $h)"
		fi
	done
	rm -f "$spec"
	log "installed $(on "${HOST[0]}" dpkg-query -W -f '${Package} ${Version}' etcdkeeper) on ${HOST[*]}, spec written, WatchdogSec=$WATCHDOG drop-in, nothing started"
}

# 1. enable --now on each host, one after the other: each returns when its
# agent sent READY=1, not when the cluster has quorum (else the first host
# would hang); the unit turns active only on READY=1.
s_ready() {
	local h c t
	for h in "${HOST[@]}"; do
		c=$(cursor "$h")
		t=$EPOCHREALTIME
		E2E_CMD_TIMEOUT=150 sctl "$h" enable --now etcdkeeper 2>&1 | sed "s/^/      $h: /" ||
			fail -h "$h" "$h: systemctl enable --now etcdkeeper failed"
		log "$h: systemctl enable --now returned after $(elapsed "$t")s"
		[[ $(prop "$h" Type) == notify ]] || fail -h "$h" "$h: unit Type is $(prop "$h" Type), want notify"
		[[ $(prop "$h" WatchdogUSec) == "$WATCHDOG" ]] || fail -h "$h" "$h: WatchdogUSec is $(prop "$h" WatchdogUSec), want $WATCHDOG (the drop-in)"
		[[ $(prop "$h" ActiveState)/$(prop "$h" SubState) == active/running ]] ||
			fail -h "$h" "$h: after enable --now the unit is $(prop "$h" ActiveState)/$(prop "$h" SubState)"
		# systemd's own log: the unit stayed in "start" (activating) until
		# the agent's READY=1 arrived, then went to "running".
		local main seq
		main=$(prop "$h" MainPID)
		seq=$(journal_since "$h" "$c" -o cat _PID=1 | grep -E "etcdkeeper.service: (Got notification message from PID $main \(READY=1|Changed [a-z-]+ -> (start|running))" | sed -E 's/^etcdkeeper.service: //')
		printf '%s\n' "$seq" | sed "s/^/      $h systemd: /"
		printf '%s\n' "$seq" | awk '
			/Changed .* -> start$/ { s = NR }
			/READY=1/ && s && !r { r = NR }
			/Changed start -> running$/ && r { ok = 1 }
			END { exit !ok }' ||
			fail -h "$h" "$h: systemd's log does not show start -> READY=1 -> running (above)"
	done
	wait_all_healthy 90 || fail "the cluster did not reach 3 healthy voters"
	for h in "${HOST[@]}"; do
		local id
		wait_for 10 "$h: STATUS= says 3/3 healthy" status_says_healthy "$h" ||
			fail -h "$h" "$h: STATUS is '$(prop "$h" StatusText)', want '<member>: voter|leader, healthy; leader ...; 3/3 healthy'"
		local out
		out=$(sctl "$h" status etcdkeeper)
		grep -q "Status: \"$(member "$h"): .*3/3 healthy\"" <<<"$out" ||
			fail -h "$h" "$h: systemctl status shows no agent Status: line: $out"
		grep -E '^ *(Active|Status):' <<<"$out" | sed "s/^ */      $h: /"
		id=$(agent_field "$h" memberID)
		put "id-$h" "$id"
	done
}

# 2. The agent and etcd run as etcd, without capabilities, under the
# system call filter, in a mount namespace where only the state dirs (and
# a private /tmp) are writable; etcd works there.
s_hardened() {
	local h=${HOST[0]} m main epid uid gid p f
	m=$(member "$h")
	main=$(prop "$h" MainPID)
	epid=$(etcd_pid "$h")
	uid=$(on "$h" id -u etcd)
	gid=$(on "$h" id -g etcd)
	for p in "$main" "$epid"; do
		f=$(on "$h" cat "/proc/$p/status")
		local what
		what="$h: pid $p ($(on "$h" cat "/proc/$p/comm"))"
		grep -Eq "^Uid:\s+$uid\s+$uid\s+$uid\s+$uid$" <<<"$f" || fail -h "$h" "$what: not running as etcd ($(grep ^Uid: <<<"$f"))"
		grep -Eq "^Gid:\s+$gid\s+$gid\s+$gid\s+$gid$" <<<"$f" || fail -h "$h" "$what: not in group etcd ($(grep ^Gid: <<<"$f"))"
		grep -Eq '^CapEff:\s+0+$' <<<"$f" || fail -h "$h" "$what: has capabilities ($(grep ^CapEff: <<<"$f"))"
		grep -Eq '^CapBnd:\s+0+$' <<<"$f" || fail -h "$h" "$what: bounding set not empty ($(grep ^CapBnd: <<<"$f"))"
		grep -Eq '^NoNewPrivs:\s+1$' <<<"$f" || fail -h "$h" "$what: NoNewPrivs is off"
		grep -Eq '^Seccomp:\s+2$' <<<"$f" || fail -h "$h" "$what: no seccomp filter"
		[[ $(on "$h" cat "/proc/$p/cgroup") == *etcdkeeper.service* ]] || fail -h "$h" "$what: not in the etcdkeeper.service cgroup"
		log "$what: uid/gid etcd, no capabilities, NoNewPrivs, seccomp filter, in etcdkeeper.service"
	done
	[[ $(on "$h" cat "/proc/$epid/stat" | awk '{print $4}') == "$main" ]] || fail -h "$h" "$h: etcd ($epid) is not the agent's child"

	# Probe the service's mount namespace: as root (so a refusal is the
	# mount, not file permissions) and as etcd.
	on "$h" touch /tmp/e2e-outside
	local probe
	probe='
		for d in "$@"; do
			f="$d/.e2e-probe-$$"
			if err=$( { : >"$f"; } 2>&1); then rm -f "$f"; echo "$d writable"; else echo "$d not writable: ${err##*: }"; fi
		done
		[ -e /tmp/e2e-outside ] && echo "/tmp is shared" || echo "/tmp is private"
		[ -e /root/'"$(basename "$deb")"' ] && echo "/root is visible" || echo "/root is hidden"'
	local as_root as_etcd
	as_root=$(on "$h" nsenter -t "$main" -m -- sh -c "$probe" probe / /etc /etc/etcdkeeper /usr /var /var/lib /var/lib/etcd /var/lib/etcdkeeper /tmp /var/tmp)
	as_etcd=$(on "$h" nsenter -t "$main" -m -S "$uid" -G "$gid" -- sh -c "$probe" probe /etc/etcdkeeper "/var/lib/etcd/$m" "/var/lib/etcdkeeper/$m" /tmp)
	printf '%s\n' "$as_root" | sed "s/^/      $h unit namespace, root: /"
	printf '%s\n' "$as_etcd" | sed "s/^/      $h unit namespace, etcd: /"
	local want_root="/ not writable: Read-only file system
/etc not writable: Read-only file system
/etc/etcdkeeper not writable: Read-only file system
/usr not writable: Read-only file system
/var not writable: Read-only file system
/var/lib not writable: Read-only file system
/var/lib/etcd writable
/var/lib/etcdkeeper writable
/tmp writable
/var/tmp writable
/tmp is private
/root is hidden"
	local want_etcd="/etc/etcdkeeper not writable: Read-only file system
/var/lib/etcd/$m writable
/var/lib/etcdkeeper/$m writable
/tmp writable
/tmp is private
/root is hidden"
	[[ $as_root == "$want_root" ]] || fail -h "$h" "$h: the unit's file system is not what ProtectSystem=strict/PrivateTmp/ProtectHome make (want: $(tr '\n' ';' <<<"$want_root"))"
	[[ $as_etcd == "$want_etcd" ]] || fail -h "$h" "$h: as etcd in the unit's namespace (want: $(tr '\n' ';' <<<"$want_etcd"))"
	on "$h" rm -f /tmp/e2e-outside

	local score
	score=$(on "$h" systemd-analyze security etcdkeeper.service --no-pager | sed -n 's/.*Overall exposure level for etcdkeeper.service: \([0-9.]*\).*/\1/p')
	[[ -n $score ]] || fail -h "$h" "$h: systemd-analyze security printed no exposure level"
	awk -v s="$score" 'BEGIN { exit !(s < 2.0) }' || fail -h "$h" "$h: systemd-analyze security: exposure $score, want < 2.0"
	log "$h: systemd-analyze security etcdkeeper.service: exposure $score"

	# etcd works inside the sandbox: writes through one member, every
	# member has them; every file in the state dirs belongs to etcd.
	local i
	for i in $(seq 1 "$NKEYS"); do
		etcd_put "${IP[0]}" "$(printf 'e2e/k%03d' "$i")" "$(value_of "$i")" || fail -h "$h" "put e2e/k$i through ${IP[0]} failed"
	done
	for p in "${IP[@]}"; do
		wait_for 30 "$p holds the $NKEYS keys" has_all_keys "$p" || fail "member $p does not have the keys written"
	done
	local foreign
	for p in "${HOST[@]}"; do
		foreign=$(on "$p" find /var/lib/etcd /var/lib/etcdkeeper ! -user etcd)
		[[ -z $foreign ]] || fail -h "$p" "$p: files not owned by etcd in the state dirs: $foreign"
	done
	log "etcd writes and replicates inside the sandbox; the state dirs hold only etcd's files"

	# Who can change what (docs/security.md): agent.addr serves reads only;
	# changes go through the control socket in the state dir, which only
	# root and etcd can reach.
	local code sock="/var/lib/etcdkeeper/$m/agent.sock"
	code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 -X POST -d '{"id":"e2e","role":"fenced","source":"x"}' "http://${IP[0]}:2378/recovery")
	[[ $code == 403 ]] || fail -h "$h" "$h: POST /recovery on agent.addr from another host answered $code, want 403"
	on "$h" test -S "$sock" || fail -h "$h" "$h: no control socket $sock"
	[[ $(on "$h" stat -c '%a %U' "/var/lib/etcdkeeper/$m") == "700 etcd" ]] || fail -h "$h" "$h: the control socket's dir is $(on "$h" stat -c '%a %U' "/var/lib/etcdkeeper/$m"), want 700 etcd"
	if on "$h" setpriv --reuid=65534 --regid=65534 --clear-groups stat "$sock" >/dev/null 2>&1; then
		fail -h "$h" "$h: uid 65534 can reach the control socket $sock"
	fi
	[[ $(agent_field "$h" recovery) == null ]] || fail -h "$h" "$h: the refused POST left a recovery: $(agent_field "$h" recovery)"
	log "$h: POST on agent.addr 403; control socket $sock in a 0700 dir of etcd, out of uid 65534's reach"
}

# 3. etcd killed: the agent restarts it (same member). The agent killed
# too (systemctl kill -s KILL): systemd restarts the unit (same member).
s_kill() {
	local h=${HOST[0]} id main old new n0
	id=$(get "id-$h")
	main=$(prop "$h" MainPID)
	old=$(etcd_pid "$h")
	on "$h" sh -c "kill -KILL $old"
	log "$h: killed etcd (pid $old) with SIGKILL"
	wait_for 60 "$h: etcd restarted by the agent, member $id healthy" etcd_restarted "$h" "$old" "$id" ||
		fail -h "$h" "$h: etcd was not restarted as member $id within 60s"
	new=$(etcd_pid "$h")
	[[ $(prop "$h" MainPID) == "$main" ]] || fail -h "$h" "$h: the agent itself was restarted (MainPID $main -> $(prop "$h" MainPID)); the agent should have restarted etcd"
	log "$h: agent (pid $main) restarted etcd: pid $old -> $new, member $id"
	journal "$h" -o cat | grep -F '"msg":"etcd exited"' | tail -n1 | sed "s/^/      $h: /" || true
	wait_all_healthy 60 || fail "cluster not healthy after etcd was killed on $h"

	n0=$(prop "$h" NRestarts)
	sctl "$h" kill -s KILL etcdkeeper
	log "$h: systemctl kill -s KILL etcdkeeper (agent and etcd)"
	wait_for 60 "$h: systemd restarted the unit, member $id healthy" unit_restarted "$h" "$n0" "$id" ||
		fail -h "$h" "$h: the unit was not restarted with member $id healthy within 60s"
	log "$h: unit restarted by systemd (NRestarts $n0 -> $(prop "$h" NRestarts), MainPID $main -> $(prop "$h" MainPID)), member $id"
	wait_all_healthy 60 || fail "cluster not healthy after the unit was killed on $h"
}

# Offset in the middle of the written part of a WAL file. etcd
# preallocates 64 MB of zeros and stops reading at the first zero record
# length, so a byte flipped at filesize/2 is never read: flip one in the
# middle of the records instead.
wal_mid() {
	local used
	used=$(cmp -l "$1" /dev/zero 2>/dev/null | tail -n1 | awk '{print $1}') || true
	[[ -n $used ]] || return 1
	echo $((used / 2))
}
flip_byte() {
	local f=$1 off=$2 b
	b=$(od -An -tu1 -j "$off" -N1 "$f" | tr -d ' ')
	# shellcheck disable=SC2059
	printf "\\$(printf %03o $((b ^ 255)))" | dd of="$f" bs=1 seek="$off" count=1 conv=notrunc status=none
}

# 4. A corrupt WAL: the agent replaces its member (new ID) from the healthy
# peers, keeps the broken data in the backups dir and says so in the journal.
s_repair() {
	local h=${HOST[1]} m id d wal off sum c
	m=$(member "$h")
	id=$(get "id-$h")
	d=$(hdir "$h")/root
	E2E_CMD_TIMEOUT=90 sctl "$h" stop etcdkeeper
	log "$h: stopped"
	[[ $(sctl "$h" is-active etcdkeeper || true) == inactive ]] || fail -h "$h" "$h: still active after systemctl stop"
	[[ -z $(etcd_procs "$h") ]] || fail -h "$h" "$h: processes of user etcd left after systemctl stop: $(etcd_procs "$h" | tr '\n' ' ')"
	wal=$d/var/lib/etcd/$m/member/wal/0000000000000000-0000000000000000.wal
	[[ -f $wal ]] || fail -h "$h" "$h: no WAL at $wal"
	off=$(wal_mid "$wal") || fail -h "$h" "$h: WAL $wal is empty"
	flip_byte "$wal" "$off"
	sum=$(sha256sum <"$wal" | cut -d' ' -f1)
	log "$h: flipped the byte at offset $off of $(basename "$wal") ($(stat -c %s "$wal") bytes)"
	local verdict
	verdict=$(on "$h" etcdkeeper inspect --data-dir "/var/lib/etcd/$m" 2>&1) && fail -h "$h" "$h: etcdkeeper inspect does not see the damage: $verdict"
	printf '%s\n' "$verdict" | sed "s/^/      $h inspect: /"
	c=$(cursor "$h")
	local t=$EPOCHREALTIME
	E2E_CMD_TIMEOUT=150 sctl "$h" start etcdkeeper || fail -h "$h" "$h: systemctl start failed"
	log "$h: systemctl start returned after $(elapsed "$t")s; status: $(prop "$h" StatusText)"
	wait_for 120 "$h: repaired: healthy voter with a new member ID" new_member "$h" "$id" ||
		fail -h "$h" "$h: not a healthy voter with a new member ID within 120s"
	local nid
	nid=$(agent_field "$h" memberID)
	put "id-$h" "$nid"
	log "$h: member $id replaced by $nid"
	wait_all_healthy 90 || fail -h "$h" "cluster not healthy after the repair of $h"
	agent_status "$h" | jq -e --arg old "$id" '[.members[].id] | index($old) | not' >/dev/null || fail -h "$h" "old member $id is still in the member list"
	wait_for 30 "$h holds the data" has_all_keys "$(ip "$h")" || fail -h "$h" "$h: data not intact after the repair"

	local j
	j=$(journal_since "$h" "$c" -u etcdkeeper -o cat)
	for want in '"msg":"rejoin started"' '"msg":"rejoin step"' '"msg":"rejoin finished: member is a healthy voter"'; do
		grep -qF "$want" <<<"$j" || fail -h "$h" "$h: journalctl -u etcdkeeper has no $want"
	done

	# The broken data is kept where the agent says it put it (by default
	# <dataDir>/.etcdkeeper-backups/<time>-<name>), inside the unit's
	# writable /var/lib/etcd, and holds the corrupted WAL byte for byte.
	local backup b
	backup=$(grep -F '"msg":"rejoin finished: member is a healthy voter"' <<<"$j" | tail -n1 | jq -r '.backup // empty')
	[[ -n $backup ]] || fail -h "$h" "$h: 'rejoin finished' names no backup"
	[[ $backup == /var/lib/etcd/* && $backup == *"-$m" ]] || fail -h "$h" "$h: backup $backup is not a <time>-$m under /var/lib/etcd"
	b=$(find "$d$backup" -name "$(basename "$wal")" 2>/dev/null | head -n1)
	[[ -n $b && $(sha256sum <"$b" | cut -d' ' -f1) == "$sum" ]] || fail -h "$h" "$h: the backup $backup does not hold the corrupt WAL"
	log "$h: the broken data is kept in $backup (its WAL is the corrupted one: ${b#"$d"})"
	grep -E '"msg":"rejoin[^"]*"' <<<"$j" | jq -rc '[.msg, .step // .kind, .removed // ."member-id" // .to // .path // ""] | map(select(. != null)) | join(" ")' | sed "s/^/      $h journal: /"
}

# 5. A spec edit + systemctl reload: the agent tells systemd RELOADING=1
# then READY=1, and applies the spec (a changed etcd flag: each member is
# restarted with it, one at a time).
s_reload() {
	local h c main spec gen0 seq
	spec=$(mktemp)
	spec_yaml reloaded >"$spec"
	gen0=$(agent_field "${HOST[0]}" specGeneration)
	for h in "${HOST[@]}"; do
		main=$(prop "$h" MainPID)
		c=$(cursor "$h")
		on "$h" sh -c "cat >$SPEC.new && mv $SPEC.new $SPEC" <"$spec"
		sctl "$h" reload etcdkeeper || fail -h "$h" "$h: systemctl reload failed"
		wait_for 20 "$h: systemd got RELOADING=1 then READY=1 from the agent after the reload" reload_notified "$h" "$c" "$main" ||
			fail -h "$h" "$h: no RELOADING=1 then READY=1 after systemctl reload"
		seq=$(journal_since "$h" "$c" -o cat _PID=1 | grep -E "etcdkeeper.service: (Got notification message from PID $main \((RELOADING|READY)=1|Changed (running|reload) -> (reload|running))" | sed 's/^etcdkeeper.service: //')
		printf '%s\n' "$seq" | sed "s/^/      $h systemd: /"
		wait_for 20 "$h: the agent applied the spec" spec_applied "$h" "$c" || fail -h "$h" "$h: no 'spec applied' in the journal"
		[[ $(prop "$h" ActiveState) == active ]] || fail -h "$h" "$h: unit is $(prop "$h" ActiveState) after the reload"
	done
	rm -f "$spec"
	# Applied: every agent runs the new spec and every etcd runs with the
	# new flag (restarted one at a time), same members, all healthy.
	wait_for 120 "every etcd restarted with --snapshot-count=5000" etcd_has_flag --snapshot-count=5000 ||
		fail "etcd was not restarted with the new flag everywhere"
	wait_all_healthy 90 || fail "cluster not healthy after the spec reload"
	local gen
	for h in "${HOST[@]}"; do
		gen=$(agent_field "$h" specGeneration)
		[[ $gen != "$gen0" && $gen == $(agent_field "${HOST[0]}" specGeneration) ]] || fail -h "$h" "$h: runs spec generation $gen (before: $gen0)"
		member_healthy "$h" "$(get "id-$h")" >/dev/null || fail -h "$h" "$h: member changed or unhealthy after the reload"
		[[ $(agent_field "$h" reloadsOK) -ge 1 ]] || fail -h "$h" "$h: reloadsOK is $(agent_field "$h" reloadsOK)"
	done
	log "all agents run spec $gen0 -> $gen; every etcd runs --snapshot-count=5000; same members, 3/3 healthy"
}

# 6. A frozen agent (SIGSTOP) stops pinging the watchdog: systemd kills and
# restarts it; the member stays (or is again) a healthy voter, same ID.
# Every host has run with the short WatchdogSec drop-in since step 1.
s_watchdog() {
	local h=${HOST[2]} id main n0 c
	id=$(get "id-$h")
	[[ $(prop "$h" WatchdogUSec) == "$WATCHDOG" ]] || fail -h "$h" "$h: WatchdogUSec is $(prop "$h" WatchdogUSec), want $WATCHDOG"
	wait_for 60 "$h: member $id healthy" member_healthy "$h" "$id" || fail -h "$h" "$h: not healthy"
	main=$(prop "$h" MainPID)
	n0=$(prop "$h" NRestarts)
	# A healthy agent pings in time: 12s (> WatchdogSec, > the loop's
	# steady 5 s period) without a kill.
	sleep 12
	[[ $(prop "$h" MainPID) == "$main" ]] || fail -h "$h" "$h: the watchdog killed a healthy agent (MainPID $main -> $(prop "$h" MainPID))"
	log "$h: agent $main kept the $WATCHDOG watchdog happy for 12s"
	c=$(cursor "$h")
	sctl "$h" kill -s SIGSTOP --kill-who=main etcdkeeper
	on "$h" grep -q '^State:.*stopped' "/proc/$main/status" || fail -h "$h" "$h: agent $main is not stopped after SIGSTOP"
	log "$h: agent $main frozen (SIGSTOP)"
	wait_for 60 "$h: systemd killed the frozen agent and restarted the unit" unit_restarted "$h" "$n0" ||
		fail -h "$h" "$h: the frozen agent was not restarted within 60s"
	local j
	j=$(journal_since "$h" "$c" -u etcdkeeper -o cat -p info)
	grep -E 'Watchdog timeout|Killing process|Main process exited|Scheduled restart job|Started etcdkeeper' <<<"$j" | sed "s/^/      $h: /"
	grep -q 'Watchdog timeout' <<<"$j" || fail -h "$h" "$h: no 'Watchdog timeout' from systemd"
	wait_for 60 "$h: member $id healthy after the watchdog restart" member_healthy "$h" "$id" || fail -h "$h" "$h: member not healthy (or changed) after the watchdog restart"
	wait_all_healthy 60 || fail "cluster not healthy after the watchdog restart on $h"
	log "$h: MainPID $main -> $(prop "$h" MainPID), NRestarts $n0 -> $(prop "$h" NRestarts), member $id healthy"
}

# 7. Power a host off and boot it again: the enabled unit starts at boot
# and resumes the same member.
s_powercycle() {
	local h=${HOST[0]} id
	id=$(get "id-$h")
	power_off "$h"
	log "$h: powered off"
	wait_for 30 "the other agents see 2/3 healthy" others_see_down "${HOST[1]}" ||
		fail "the others do not see $h down"
	log "${HOST[1]}'s agent: $(prop "${HOST[1]}" StatusText)"
	boot "$h"
	local boots
	boots=$(on "$h" journalctl --list-boots --no-pager)
	[[ $(grep -cE '[0-9a-f]{32}' <<<"$boots") -ge 2 ]] || fail -h "$h" "$h: the journal does not show a second boot: $boots"
	wait_for 90 "$h: member $id healthy after the reboot" member_healthy "$h" "$id" || fail -h "$h" "$h: member $id not healthy after the reboot"
	[[ $(sctl "$h" is-active etcdkeeper) == active ]] || fail -h "$h" "$h: etcdkeeper is not active after boot"
	wait_all_healthy 90 || fail -h "$h" "cluster not healthy after $h rebooted"
}

# 8. apt-get remove (not purge) stops the agent and keeps data and spec;
# installing again resumes the same member.
s_reinstall() {
	local h=${HOST[2]} m id sum
	m=$(member "$h")
	id=$(get "id-$h")
	sum=$(on "$h" sha256sum "$SPEC" | cut -d' ' -f1)
	on "$h" env DEBIAN_FRONTEND=noninteractive apt-get remove -y -q -o Dpkg::Use-Pty=0 etcdkeeper </dev/null 2>&1 | sed "s/^/      $h: /" ||
		fail -h "$h" "$h: apt-get remove failed"
	[[ $(on "$h" dpkg-query -W -f '${db:Status-Abbrev}' etcdkeeper) == rc* ]] || fail -h "$h" "$h: package state is not rc (removed, config kept)"
	[[ $(sctl "$h" is-active etcdkeeper || true) != active ]] || fail -h "$h" "$h: etcdkeeper still active after remove"
	[[ -z $(etcd_procs "$h") ]] || fail -h "$h" "$h: processes of user etcd still run after remove"
	on "$h" test -d "/var/lib/etcd/$m/member/wal" || fail -h "$h" "$h: data dir gone after remove"
	on "$h" test -d "/var/lib/etcdkeeper/$m" || fail -h "$h" "$h: state dir gone after remove"
	[[ $(on "$h" sha256sum "$SPEC" | cut -d' ' -f1) == "$sum" ]] || fail -h "$h" "$h: spec changed or gone after remove"
	on "$h" id etcd >/dev/null || fail -h "$h" "$h: user etcd gone after remove"
	log "$h: removed; data, state, spec and user etcd kept"
	# The others keep the member: the spec still lists it.
	sleep 3
	agent_status "${HOST[1]}" | jq -e --arg id "$id" '[.members[].id] | index($id)' >/dev/null ||
		fail "member $id was removed from the cluster while its host's package was removed"

	on "$h" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q -o Dpkg::Use-Pty=0 "/root/$(basename "$deb")" </dev/null 2>&1 | sed "s/^/      $h: /" ||
		fail -h "$h" "$h: reinstall failed"
	[[ $(on "$h" sha256sum "$SPEC" | cut -d' ' -f1) == "$sum" ]] || fail -h "$h" "$h: the reinstall replaced the edited spec"
	[[ $(sctl "$h" is-active etcdkeeper || true) != active ]] || fail -h "$h" "$h: the reinstall started etcdkeeper by itself"
	E2E_CMD_TIMEOUT=150 sctl "$h" enable --now etcdkeeper 2>&1 | sed "s/^/      $h: /" || fail -h "$h" "$h: start after reinstall failed"
	wait_for 90 "$h: same member $id healthy after the reinstall" member_healthy "$h" "$id" || fail -h "$h" "$h: not the same healthy member after the reinstall"
	wait_all_healthy 90 || fail "cluster not healthy after the reinstall on $h"
	converged "${HOST[0]}" | sed 's/^/      /'
}

# 10. A fleet-wide package upgrade: the new .deb installed on all three
# hosts in the same second (dpkg -i in parallel). The package restarts
# nothing (postinst); each agent notices its binary replaced and, in its
# turn (one at a time under the cluster lock, the others a caught-up
# quorum, the leader last with its leadership moved off), stops etcd and
# execs the new binary: the unit's main PID stays, systemd restarts
# nothing (NRestarts unchanged). A steady writer through the members sees
# no failed write; the test's own watcher (each member's status, every
# 0.3 s) never sees fewer than 2 healthy voters; all three end on the new
# version with their old member IDs.
# upg_writer STOPFILE OUT: puts e2e-upg/k<i> every 50 ms through the
# members in turn, each write retried through the next member for up to
# 10 s; writes "ok failed maxstall_ms" to OUT when STOPFILE appears.
upg_writer() {
	local stop=$1 out=$2 i=0 ok=0 failed=0 max=0 t0 d n good
	while [[ ! -e $stop ]]; do
		orphan_guard
		t0=$EPOCHREALTIME
		n=0 good=1
		until etcd_put "${IP[$(((i + n) % 3))]}" "e2e-upg/k$i" v; do
			n=$((n + 1))
			if [[ $(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { print (b - a > 10) }') == 1 ]]; then
				failed=$((failed + 1)) good=0
				break
			fi
			sleep 0.05
		done
		d=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%d", (b - a) * 1000 }')
		((d <= max)) || max=$d
		((good == 0)) || ok=$((ok + 1))
		i=$((i + 1))
		sleep 0.05
	done
	echo "$ok $failed $max" >"$out"
}
# upg_watch STOPFILE OUT: every 0.3 s asks each member's status: the
# fewest members answering with a leader, and the leader changes; writes
# "fewest changes" to OUT.
upg_watch() {
	local stop=$1 out=$2 fewest=3 changes=0 last= h n l lead
	while [[ ! -e $stop ]]; do
		orphan_guard
		n=0 lead=
		for h in "${IP[@]}"; do
			l=$(curl -sf --max-time 1 -X POST "http://$h:2379/v3/maintenance/status" -d '{}' | jq -r '.leader // "0"') || l=0
			if [[ $l != 0 && -n $l ]]; then
				n=$((n + 1))
				lead=$l
			fi
		done
		((n < fewest)) && fewest=$n
		if [[ -n $lead ]]; then
			[[ -n $last && $lead != "$last" ]] && changes=$((changes + 1))
			last=$lead
		fi
		sleep 0.3
	done
	echo "$fewest $changes" >"$out"
}
# on_version HOST VERSION ID PID: HOST's agent runs VERSION, nothing newer
# waits on disk, its member is ID and healthy, its main PID is still PID.
on_version() {
	local st
	st=$(agent_status "$1") || { echo "$1: agent endpoint does not answer"; return 1; }
	jq -e --arg v "$2" '.version == $v and .installed == null' <<<"$st" >/dev/null ||
		{ jq -r '"\(.member): runs \(.version), installed \(.installed.version // "-"): \(.decision)"' <<<"$st"; return 1; }
	member_healthy "$1" "$3" >/dev/null || { member_healthy "$1" "$3"; return 1; }
	[[ $(prop "$1" MainPID) == "$4" ]] || { echo "$1: main PID $(prop "$1" MainPID), was $4"; return 1; }
	on "$1" cat "/var/lib/etcdkeeper/$(member "$1")/upgrade.json" | jq -e '.done' >/dev/null ||
		{ echo "$1: no closed upgrade journal"; return 1; }
}
s_upgrade() {
	local h v old t0 took w m nr ok failed stall fewest changes
	if [[ -z $upgrade_deb ]]; then
		log "no upgrade package given (run.sh DEB UPGRADE.deb): skipped"
		return 0
	fi
	wait_all_healthy 90 || fail "cluster not healthy before the upgrade"
	old=$(agent_field "${HOST[0]}" version)
	for h in "${HOST[@]}"; do
		put "upg-id-$h" "$(agent_field "$h" memberID)"
		put "upg-pid-$h" "$(prop "$h" MainPID)"
		put "upg-nr-$h" "$(prop "$h" NRestarts)"
		put "upg-epid-$h" "$(etcd_pid "$h")"
	done
	rm -f "$WORK/state/upg-stop"
	upg_writer "$WORK/state/upg-stop" "$WORK/state/upg-writer" &
	w=$!
	upg_watch "$WORK/state/upg-stop" "$WORK/state/upg-watch" &
	m=$!
	sleep 2
	t0=$EPOCHREALTIME
	log "installing upgrade.deb on ${HOST[*]} at once (running $old)"
	local dpkgs=()
	for h in "${HOST[@]}"; do
		on "$h" env DEBIAN_FRONTEND=noninteractive dpkg -i --force-confold /root/upgrade.deb </dev/null >"$WORK/state/upg-dpkg-$h" 2>&1 &
		dpkgs+=($!)
	done
	for h in 0 1 2; do
		wait "${dpkgs[$h]}" || { touch "$WORK/state/upg-stop"; sed "s/^/      /" "$WORK/state/upg-dpkg-${HOST[$h]}"; fail -h "${HOST[$h]}" "${HOST[$h]}: dpkg -i upgrade.deb failed"; }
	done
	log "dpkg -i done on all three in $(elapsed "$t0")s"
	for h in "${HOST[@]}"; do
		on "$h" dpkg-query -W -f '${Version}\n' etcdkeeper | sed "s/^/      $h: installed /"
	done
	v=$(on "${HOST[0]}" etcdkeeper version | sed -n 's/^etcdkeeper //p')
	[[ -n $v && $v != "$old" ]] || { touch "$WORK/state/upg-stop"; fail "the upgrade package's etcdkeeper reports version '$v', the running one $old: not another version"; }
	log "installed etcdkeeper $v everywhere; the agents roll onto it"
	for h in "${HOST[@]}"; do
		if ! wait_for 300 "$h on $v, same member, same main PID" on_version "$h" "$v" "$(get "upg-id-$h")" "$(get "upg-pid-$h")"; then
			touch "$WORK/state/upg-stop"
			fail -h "$h" "$h did not roll onto $v"
		fi
	done
	took=$(elapsed "$t0")
	touch "$WORK/state/upg-stop"
	wait "$w" "$m" || true
	read -r ok failed stall <"$WORK/state/upg-writer"
	read -r fewest changes <"$WORK/state/upg-watch"
	log "install to all three on $v: ${took}s; writes ok $ok, failed $failed, longest write ${stall} ms; leader changes $changes; fewest members answering with a leader $fewest"
	for h in "${HOST[@]}"; do
		journal "$h" -o cat | grep -E '"msg":"(restarting onto the new binary|restarted onto the new binary[^"]*|upgrade finished)"' |
			jq -r '"      '"$h"': \(.ts // "") \(.msg) \(.from // "") \(.to // "") \(.took // "")"' 2>/dev/null || true
		nr=$(prop "$h" NRestarts)
		[[ $nr == "$(get "upg-nr-$h")" ]] || fail -h "$h" "$h: systemd restarted the unit during the upgrade (NRestarts $nr, was $(get "upg-nr-$h")): the agent should have exec'd"
		# The same embedded etcd (one tree, two versions): the new agent
		# adopts the running etcd, which never restarts.
		[[ $(etcd_pid "$h") == "$(get "upg-epid-$h")" ]] ||
			fail -h "$h" "$h: etcd restarted during an upgrade of the agent alone (pid $(get "upg-epid-$h") -> $(etcd_pid "$h"))"
	done
	((changes == 0)) || fail "$changes leader changes during an upgrade of the agents alone, want 0"
	((failed == 0)) || fail "$failed writes failed during the upgrade"
	((fewest >= 2)) || fail "only $fewest members answered with a leader at one point during the upgrade, want never fewer than 2 of 3"
	wait_all_healthy 90 || fail "cluster not healthy after the upgrade"
	converged "${HOST[0]}" | sed 's/^/      /'
}

# 11. Certificates renewed on the systemd hosts: an etcd CA (its key on
# every host, 0600, the etcd user's) and a client certificate of one
# minute under tls.renew.others; the packaged unit (ProtectSystem=strict,
# User=etcd) renews it through ReadWritePaths=-/etc/etcdkeeper/pki, twice,
# before it expires, with no restart of etcd.
s_renew() {
	local h f dir spec na0 n
	dir=$(mktemp -d)
	"${E2E_MKCERTS:?make e2e builds bin/e2e-mkcerts}" -dir "$dir" -name e2e-client -life 60s || fail "mkcerts failed"
	spec=$(mktemp)
	spec_yaml reloaded certs >"$spec"
	for h in "${HOST[@]}"; do
		on "$h" sh -c "mkdir -p $PKI && chmod 0750 $PKI" || fail -h "$h" "$h: mkdir $PKI"
		for f in ca.crt ca.key e2e-client.crt e2e-client.key; do
			on "$h" sh -c "cat >$PKI/$f" <"$dir/$f"
		done
		on "$h" sh -c "chmod 0600 $PKI/*.key && chmod 0644 $PKI/*.crt && chown -R etcd:etcd $PKI" || fail -h "$h" "$h: chown $PKI"
		put "pid-$h" "$(agent_field "$h" etcdPID)"
		on "$h" sh -c "cat >$SPEC.new && mv $SPEC.new $SPEC" <"$spec"
		sctl "$h" reload etcdkeeper || fail -h "$h" "$h: systemctl reload failed"
	done
	rm -rf "$dir" "$spec"
	na0=$(cert_not_after "${HOST[0]}")
	[[ -n $na0 ]] || fail "no e2e-client certificate in etcdkeeper certs status"
	# Two renewals of a one-minute certificate: each at half its life.
	for h in "${HOST[@]}"; do
		wait_for 150 "$h: e2e-client renewed twice (first expiry $na0)" renewed_twice "$h" "$na0" ||
			fail -h "$h" "$h: the certificate was not renewed twice: $(cert_not_after "$h")"
		n=$(on "$h" journalctl -o cat -u etcdkeeper | grep -c '"msg":"certificate renewed"' || true)
		[[ $n -ge 2 ]] || fail -h "$h" "$h: $n 'certificate renewed' lines in the journal, want 2 or more"
		[[ $(agent_field "$h" etcdPID) == "$(get "pid-$h")" ]] || fail -h "$h" "$h: etcd restarted during the renewals"
		on "$h" etcdkeeper certs status --config "$SPEC" >/dev/null || fail -h "$h" "$h: etcdkeeper certs status exits non-zero"
		log "$h: e2e-client renewed $n times (now expires $(cert_not_after "$h"), first $na0), etcd pid $(get "pid-$h") unchanged"
	done
	wait_all_healthy 30 || fail "cluster not healthy after the renewals"
}

# cert_not_after HOST: the e2e-client certificate's expiry on HOST, as
# etcdkeeper certs status reads it (Unix seconds).
cert_not_after() {
	# certs status exits 2 while a renewal fails: its JSON is still read.
	{ on "$1" etcdkeeper certs status --config "$SPEC" -o json 2>/dev/null || true; } |
		jq -r '[.[] | select(.role == "e2e-client")][0].notAfter // empty | sub("\\.[0-9]+"; "") | fromdateiso8601'
}

# renewed_twice HOST FIRST: HOST's certificate expires 55 s or more after
# the first one did (two renewals of a minute's certificate at half-life).
renewed_twice() {
	local na
	na=$(cert_not_after "$1")
	[[ -n $na ]] && ((na >= $2 + 55))
}

# 13. Across every step, with the short WatchdogSec drop-in: systemd's
# watchdog fired only once, on the agent step 6 froze on purpose.
s_no_watchdog_kills() {
	local h n want
	for h in "${HOST[@]}"; do
		want=0
		[[ $h == "${HOST[2]}" ]] && want=1
		n=$(journal "$h" -o cat | grep -c 'Watchdog timeout' || true)
		journal "$h" -o short-precise | grep 'Watchdog timeout' | sed "s/^/      $h: /" || true
		[[ $n == "$want" ]] || fail -h "$h" "$h: systemd's watchdog fired $n times over the run, want $want (step 6's)"
		log "$h: 'Watchdog timeout' $n times over the run (want $want)"
	done
}

# 12. Reboots in turns: every host asks for a reboot in the same second, as
# unattended-upgrades does (apt's /run/reboot-required), with the shipped
# etcdkeeper-reboot.path enabled: its service runs `etcdkeeper guard --
# systemctl reboot`, and the hosts reboot one at a time, the leader's last,
# each turn over only once its member has caught up again (the restarted
# agent ends it: it tells the boot by its boot ID). A reboot ends nspawn
# with 133 and boot()'s loop boots the host again. Never fewer than 2
# caught-up voters, never leaderless longer than one election timeout; no
# write of a retrying client fails.
REBOOT_SECS=${E2E_REBOOT_SECS:-420}
# etcd's --election-timeout (the spec sets none: etcd's default).
ELECTION_MS=1000
# rb_poll: one look at each member's status: "caught-up-voters leader":
# members that answer with a leader, are voters and are within 1000
# entries of the furthest (model.MinCatchUpEntries); leader 0: none.
rb_poll() {
	local h st n=0 lead=0 max=0 idx=() l
	for h in "${IP[@]}"; do
		st=$(curl -sf --connect-timeout 0.5 --max-time 0.7 -X POST "http://$h:2379/v3/maintenance/status" -d '{}' |
			jq -r 'select((.leader // "0") != "0" and (.isLearner | not)) | "\(.leader) \(.raftIndex // "0")"') || st=
		[[ -n $st ]] || continue
		read -r l st <<<"$st"
		lead=$l
		idx+=("$st")
		((st > max)) && max=$st
	done
	for st in "${idx[@]}"; do
		((st + 1000 >= max)) && n=$((n + 1))
	done
	echo "$n $lead"
}
# rb_watch STOPFILE OUT: rb_poll every 0.2 s; a look that sees fewer than
# 2 caught-up voters or no leader is taken again twice at once (a member
# that does not answer within 0.7 s on a loaded machine is not down) and
# counts only when they agree. Writes "fewest leader-changes
# longest-leaderless-ms" to OUT when STOPFILE appears.
rb_watch() {
	local stop=$1 out=$2 fewest=3 changes=0 last= n lead t0= t longest=0 d try
	while [[ ! -e $stop ]]; do
		orphan_guard
		t=$EPOCHREALTIME
		for try in 1 2 3; do
			read -r n lead < <(rb_poll)
			((n >= 2)) && [[ $lead != 0 ]] && break
		done
		((n < fewest)) && fewest=$n
		if [[ $lead != 0 ]]; then
			[[ -n $last && $lead != "$last" ]] && changes=$((changes + 1))
			last=$lead
			if [[ -n $t0 ]]; then
				d=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%d", (b - a) * 1000 }')
				((d > longest)) && longest=$d
				t0=
			fi
		elif [[ -z $t0 ]]; then
			t0=$t
		fi
		sleep 0.2
	done
	echo "$fewest $changes $longest" >"$out"
}
boots() { journalctl -D "$(hdir "$1")/root/var/log/journal" --list-boots --no-pager 2>/dev/null | grep -cE '[0-9a-f]{32}'; }
# turn_times HOST: "taken ended" (µs since the epoch) of HOST's last host
# turn, as its agent logged them.
turn_times() {
	local taken ended
	taken=$(journal "$1" -o json | jq -r 'select(.MESSAGE | test("\"msg\":\"host turn taken\"")) | .__REALTIME_TIMESTAMP' | tail -n1)
	ended=$(journal "$1" -o json | jq -r 'select(.MESSAGE | test("\"msg\":\"host turn ended\"")) | .__REALTIME_TIMESTAMP' | tail -n1)
	[[ -n $taken && -n $ended && $ended -gt $taken ]] || return 1
	echo "$taken $ended"
}
# down_times HOST: "from to" (µs): HOST's journal's last entry of the boot
# before the last one, and the first entry of the last one.
down_times() {
	journalctl -D "$(hdir "$1")/root/var/log/journal" --list-boots -o json --no-pager 2>/dev/null |
		jq -r 'sort_by(.index) | if length >= 2 then "\(.[-2].last_entry) \(.[-1].first_entry)" else empty end'
}
# hms µs: the time of day, to the millisecond.
hms() { date -d "@$(($1 / 1000000)).$(printf '%06d' $(($1 % 1000000)))" +%T.%3N; }
rebooted_back() {
	local h=$1
	(($(boots "$h") > $(get "rb-boots-$h"))) || { echo "$h: not rebooted yet"; return 1; }
	turn_times "$h" >/dev/null || { echo "$h: rebooted, its turn has not ended"; return 1; }
	member_healthy "$h" "$(get "rb-id-$h")" >/dev/null || { echo "$h: rebooted, turn ended, member not healthy"; return 1; }
}
s_reboot() {
	local h w m t0 took ok failed stall fewest changes longest leader a b e
	wait_all_healthy 90 || fail "cluster not healthy before the reboots"
	leader=$(agent_field "${HOST[0]}" leaderName)
	for h in "${HOST[@]}"; do
		put "rb-boots-$h" "$(boots "$h")"
		put "rb-id-$h" "$(agent_field "$h" memberID)"
		if [[ $(member "$h") != "$h" ]]; then
			# The unit's comment: a member not named after its host.
			on "$h" sh -c "mkdir -p /etc/systemd/system/etcdkeeper-reboot.service.d && printf '[Service]\nExecStart=\nExecStart=/usr/bin/etcdkeeper guard --config $SPEC --name $(member "$h") -- /bin/systemctl reboot\n' >/etc/systemd/system/etcdkeeper-reboot.service.d/name.conf"
			sctl "$h" daemon-reload
		fi
		sctl "$h" enable --now etcdkeeper-reboot.path >/dev/null 2>&1 || fail -h "$h" "$h: systemctl enable --now etcdkeeper-reboot.path failed"
	done
	rm -f "$WORK/state/rb-stop"
	# The writer and the watcher stop with the step, however it ends.
	trap 'touch "$WORK/state/rb-stop"' EXIT
	trap 'exit 143' TERM
	upg_writer "$WORK/state/rb-stop" "$WORK/state/rb-writer" &
	w=$!
	rb_watch "$WORK/state/rb-stop" "$WORK/state/rb-watch" &
	m=$!
	sleep 2
	t0=$EPOCHREALTIME
	log "touching /run/reboot-required on ${HOST[*]} at once (leader: $leader)"
	local touches=()
	for h in "${HOST[@]}"; do
		on "$h" touch /run/reboot-required &
		touches+=($!)
	done
	wait "${touches[@]}" || fail "touching /run/reboot-required failed"
	# The hosts come back in their turns' order, the leader's last: each
	# one is logged as it comes back, all three within REBOOT_SECS.
	local deadline=$((SECONDS + REBOOT_SECS)) back=() left out why
	while :; do
		orphan_guard
		left=0 why=
		for h in "${HOST[@]}"; do
			[[ " ${back[*]} " == *" $h "* ]] && continue
			if out=$(rebooted_back "$h" 2>&1); then
				back+=("$h")
				log "$h rebooted in its turn and back: member $(get "rb-id-$h") healthy, $(elapsed "$t0")s after the touch"
			else
				left=$((left + 1)) why+="${why:+; }$out"
			fi
		done
		((left == 0)) && break
		if ((SECONDS >= deadline)); then
			for h in "${HOST[@]}"; do
				[[ " ${back[*]} " == *" $h "* ]] && continue
				on "$h" journalctl -u etcdkeeper-reboot --no-pager -o cat 2>/dev/null | tail -n 15 | sed "s/^/      $h etcdkeeper-reboot: /" || true
				echo "$h" >>"$WORK/failed-hosts"
			done
			fail "not all hosts rebooted in their turns and came back within ${REBOOT_SECS}s: $why"
		fi
		sleep 2
	done
	took=$(elapsed "$t0")
	touch "$WORK/state/rb-stop"
	wait "$w" "$m" || true
	read -r ok failed stall <"$WORK/state/rb-writer"
	read -r fewest changes longest <"$WORK/state/rb-watch"
	# Each host was down (its journal's last entry before the reboot to
	# the first one after it) inside its own turn, and the turns, in the
	# order they were taken, did not overlap: one host down at a time.
	local order=() da db n
	for h in "${HOST[@]}"; do
		read -r a b < <(turn_times "$h")
		read -r da db < <(down_times "$h") || fail -h "$h" "$h: its journal lists no reboot"
		n=$(boots "$h")
		log "$h: turn taken $(hms "$a"), ended $(hms "$b") ($(((b - a) / 1000)) ms); down $(hms "$da") → $(hms "$db") ($(((db - da) / 1000)) ms); boots $(get "rb-boots-$h") → $n"
		((n == $(get "rb-boots-$h") + 1)) || fail -h "$h" "$h booted $((n - $(get "rb-boots-$h"))) times, want once"
		((a < da && db < b)) || fail -h "$h" "$h was down from $(hms "$da") to $(hms "$db"), not inside its turn ($(hms "$a") to $(hms "$b"))"
		order+=("$a $b $h")
	done
	mapfile -t order < <(printf '%s\n' "${order[@]}" | sort -n)
	local prev_end=0 last=
	for e in "${order[@]}"; do
		read -r a b h <<<"$e"
		((a >= prev_end)) || fail -h "$h" "$h took its turn at $(hms "$a"), before the previous turn ended at $(hms "$prev_end"): two hosts rebooted together"
		prev_end=$b last=$h
	done
	log "three reboots in turns: all back in ${took}s; order: $(printf '%s\n' "${order[@]}" | awk '{print $3}' | tr '\n' ' '); writes ok $ok, failed $failed, longest write ${stall} ms; leader changes $changes; fewest caught-up voters $fewest; longest without a leader ${longest} ms"
	[[ $(member "$last") == "$leader" ]] || fail "the leader $leader's host did not reboot last (last: $last)"
	((failed == 0)) || fail "$failed writes failed during the reboots"
	((fewest >= 2)) || fail "only $fewest caught-up voters at one point, want never fewer than 2 of 3"
	((longest <= ELECTION_MS)) || fail "no leader for ${longest} ms at one point, want never longer than one election timeout (${ELECTION_MS} ms)"
	wait_all_healthy 90 || fail "cluster not healthy after the reboots"
}

# 9. One host cut off from the others and from the test for a minute (its
# veth taken off the bridge, the link itself stays up, as when a switch
# port or an uplink fails): the other two keep serving (every write through
# them succeeds), nobody is removed, repaired or restarted; after the cut
# heals the cut-off host is a healthy voter with its old member ID and has
# the writes made meanwhile. The cut host is the leader at the time: the
# others must elect a new one.
CUT_SECS=${E2E_CUT_SECS:-60}
holds_cut_writes() {
	local got
	got=$(etcd_count_range "$(ip "$1")" e2e-cut/k e2e-cut/l) || { echo "$1: range failed"; return 1; }
	[[ $got == "$2" ]] || { echo "$1 holds $got of the $2 writes"; return 1; }
}
s_cut() {
	local h o id leader=
	for h in "${HOST[@]}"; do
		[[ $(agent_field "$h" role) == leader ]] && leader=$h
	done
	[[ -n $leader ]] || fail "no agent says its member is the leader"
	h=$leader
	id=$(get "id-$h")
	local others=() c=() p0=()
	for o in "${HOST[@]}"; do
		[[ $o == "$h" ]] || others+=("$o")
	done
	for o in "${HOST[@]}"; do
		c+=("$(cursor "$o")")
		p0+=("$(etcd_pid "$o")")
	done
	local ids_before
	ids_before=$(agent_status "${others[0]}" | jq -c '[.members[].id] | sort')

	command ip link set "$(veth "$h")" nomaster
	local t0=$SECONDS
	log "$h (member $id, the leader) cut off: $(veth "$h") taken off $BRIDGE for ${CUT_SECS}s"
	! reachable "$h" || fail -h "$h" "$h is still reachable after the cut"
	wait_for 30 "a write through ${others[*]} succeeds (a new leader elected)" etcd_put "$(ip "${others[0]}")" e2e-cut/first x ||
		fail "the two hosts left did not accept a write within 30s of the cut"
	log "the others serve again $((SECONDS - t0))s after the cut"
	local n=0 failed=0 via st
	while ((SECONDS - t0 < CUT_SECS)); do
		orphan_guard
		via=${others[$((n % 2))]}
		n=$((n + 1))
		if ! etcd_put "$(ip "$via")" "$(printf 'e2e-cut/k%03d' "$n")" "written during the cut through $via"; then
			failed=$((failed + 1))
			log "put $n through $via FAILED"
		fi
		for o in "${others[@]}"; do
			st=$(agent_status "$o") || fail -h "$o" "$o: agent does not answer during the cut"
			jq -e --arg id "$id" '[.members[].id] | index($id)' <<<"$st" >/dev/null ||
				fail -h "$o" "$o: member $id of the cut-off host $h is no longer in the member list"
		done
		sleep 1
	done
	((failed == 0)) || fail "$failed of $n writes through ${others[*]} failed during the cut"
	log "$n writes through ${others[*]} during the cut, none failed; $h's member $id stayed in the member list"
	for o in "${others[@]}"; do
		log "$o's agent during the cut: $(prop "$o" StatusText)"
	done

	command ip link set "$(veth "$h")" master "$BRIDGE"
	t0=$SECONDS
	log "$h back on $BRIDGE"
	wait_for 60 "$h: member $id (the old ID) a healthy voter again" member_healthy "$h" "$id" ||
		fail -h "$h" "$h: not a healthy voter with its old member ID $id within 60s of the heal"
	log "$h: member $id healthy again $((SECONDS - t0))s after the heal"
	wait_all_healthy 60 || fail "cluster not healthy after the cut healed"
	local cnt
	# The cut host may be a "healthy voter" (it answers, knows the leader)
	# well before it has the writes: the leader keeps sending its log on
	# the connection from before the cut, whose lost packets TCP
	# retransmits with a backoff that has grown to ~50 s during the cut;
	# the new connections carry only heartbeats meanwhile. So up to 150 s.
	wait_for 150 "$h holds the $n writes made during the cut" holds_cut_writes "$h" "$n" ||
		fail -h "$h" "$h does not hold the $n writes made during the cut 150s after the heal"
	log "$h holds the writes made during the cut $((SECONDS - t0))s after the heal"
	wait_for 30 "a linearizable read through $h" etcd_read "$(ip "$h")" e2e-cut/first ||
		fail -h "$h" "$h does not serve a linearizable read"
	cnt=$(etcd_count_range "$(ip "$h")" e2e-cut/k e2e-cut/l)
	log "$h holds all $cnt writes made during the cut"
	[[ $(agent_status "${others[0]}" | jq -c '[.members[].id] | sort') == "$ids_before" ]] ||
		fail "the member IDs changed: $ids_before before the cut, $(agent_status "${others[0]}" | jq -c '[.members[].id] | sort') after"

	# Nobody removed, repaired or restarted a member: no agent logged a
	# membership change or a rejoin, and the etcd processes of the two
	# hosts that stayed are the ones from before the cut.
	local i j bad
	for i in "${!HOST[@]}"; do
		o=${HOST[$i]}
		j=$(journal_since "$o" "${c[$i]}" -u etcdkeeper -o cat)
		bad=$(grep -E '"msg":"(membership change|rejoin started|rejoin step|stopping etcd[^"]*)"' <<<"$j" || true)
		[[ -z $bad ]] || fail -h "$o" "$o's agent acted on the cluster during or after the cut: $bad"
		if [[ $o != "$h" ]]; then
			[[ $(etcd_pid "$o") == "${p0[$i]}" ]] || fail -h "$o" "$o: etcd restarted (pid ${p0[$i]} -> $(etcd_pid "$o")) during the cut of $h"
		else
			log "$h: etcd pid ${p0[$i]} -> $(etcd_pid "$o") (the cut-off host's own etcd)"
			# What its agent decided meanwhile (each decision is logged
			# when it changes).
			grep -F '"msg":"decision"' <<<"$j" | jq -r .decision 2>/dev/null | sort | uniq -c | sed "s/^/      $h agent decided: /" || true
		fi
	done
	log "member IDs unchanged ($ids_before); no agent removed, repaired or restarted a member"
}

# ================================================================ main

mkdir -p "$WORKBASE"
exec 8>"$WORKBASE/.lock"
# (A run killed with SIGKILL may leave its current step running for up to
# its deadline; that step still holds the lock.)
if ! flock -n 8; then
	echo "e2e: another run holds $WORKBASE/.lock: waiting up to 180s"
	flock -w 180 8 || { echo "e2e: another run still holds $WORKBASE/.lock" >&2; exit 1; }
fi
# A run killed before its trap ran leaves its containers: stop them now.
if [[ -d $WORK ]]; then
	echo "e2e: cleaning up after an earlier run in $WORK"
	cleanup
	rm -rf "$WORK"
fi
mkdir -p "$WORK/hosts" "$WORK/state"
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
make_bridge

step "preflight (tools, free ports)" s_preflight
step "Debian root (debootstrap, cached)" s_root
ROOTFS=$(cat "$WORK/rootfs" 2>/dev/null || true)
step "boot 3 hosts (systemd-nspawn, systemd as PID 1)" s_boot
step "install the .deb, write the spec" s_install
step "1. enable --now: active on READY, STATUS, 3 voters" s_ready
step "2. hardened unit, etcd works in the sandbox" s_hardened
step "3. kill etcd / systemctl kill: same member back" s_kill
step "4. corrupt WAL: repaired, new ID, data kept" s_repair
step "5. spec edit + systemctl reload: notified, applied" s_reload
step "6. watchdog: frozen agent killed and restarted" s_watchdog
step "7. power off + boot: same member" s_powercycle
step "8. apt-get remove keeps data; reinstall resumes" s_reinstall
step "9. one host cut off for 60s: the others serve" s_cut
step "10. the new .deb on all 3 hosts in the same second: rolled one at a time" s_upgrade
step "11. certificates renewed by the agents, no etcd restart" s_renew
step "12. all 3 hosts ask for a reboot in the same second: rebooted one at a time" s_reboot
step "13. WatchdogSec=$WATCHDOG all along: no watchdog kill but step 6's" s_no_watchdog_kills
[[ -z $FAILED ]]


#!/usr/bin/env bash
# Prints the path of the cached Debian root the e2e hosts boot from,
# building it first if the cache has none for the current recipe
# (test/e2e/rootfs.recipe). Needs root and debootstrap.
#
#   E2E_CACHE      cache dir (default /var/cache/etcdkeeper-e2e)
#   E2E_MIRROR     Debian mirror (default: the one apt on this machine uses)
#   E2E_REBUILD=1  build a new root even if one is cached
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
recipe=$here/rootfs.recipe
cache=${E2E_CACHE:-/var/cache/etcdkeeper-e2e}
# shellcheck source=rootfs.recipe source-path=SCRIPTDIR
source "$recipe"

log() { printf '%s rootfs: %s\n' "$(date +%T)" "$*" >&2; }
die() { log "FAILED: $*"; exit 1; }

arch=$(dpkg --print-architecture)
key=$( (cat "$recipe"; echo "$arch") | sha256sum | cut -c1-16)
dir=$cache/$key
root=$dir/root

# The mirror apt already uses for $SUITE (apt-get indextargets lists every
# configured source, e.g. "http://deb.debian.org/debian bookworm Packages").
mirror() {
	if [[ -n ${E2E_MIRROR:-} ]]; then
		echo "$E2E_MIRROR"
		return
	fi
	local m
	# shellcheck disable=SC2016 # apt expands $(SITE), not the shell
	m=$(apt-get indextargets --format '$(SITE) $(RELEASE) $(IDENTIFIER)' 2>/dev/null |
		awk -v s="$SUITE" '$2 == s && $3 == "Packages" { print $1; exit }')
	[[ -n $m ]] || die "no apt source for '$SUITE' on this machine (set E2E_MIRROR=http://<debian mirror>/debian)"
	echo "$m"
}

mkdir -p "$cache"
# One builder at a time; a second run waits for the first one's root.
exec 9>"$cache/.lock"
flock -w 1200 9 || die "timed out waiting for $cache/.lock"

if [[ ${E2E_REBUILD:-} == 1 ]]; then
	rm -rf "$dir"
fi
if [[ -f $dir/complete ]]; then
	log "cached root $root (recipe $key)"
	echo "$root"
	exit 0
fi

command -v debootstrap >/dev/null || die "debootstrap is not installed (apt-get install debootstrap)"
m=$(mirror)
rm -rf "$dir"
mkdir -p "$dir"
tmp=$dir/root.tmp
log "building $SUITE ($VARIANT, +$INCLUDE) from $m into $dir (a few minutes; cached afterwards)"
start=$SECONDS
if ! timeout 900 debootstrap --variant="$VARIANT" --include="$INCLUDE" "$SUITE" "$tmp" "$m" >"$dir/debootstrap.log" 2>&1; then
	tail -n 30 "$dir/debootstrap.log" >&2
	die "debootstrap failed (log: $dir/debootstrap.log)"
fi
customize "$tmp"
mv "$tmp" "$root"
{
	echo "recipe=$key arch=$arch mirror=$m built=$(date -u +%FT%TZ)"
	cat "$recipe"
} >"$dir/recipe"
touch "$dir/complete"
log "built $root in $((SECONDS - start))s ($(du -sh "$root" | cut -f1))"
echo "$root"

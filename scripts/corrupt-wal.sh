#!/usr/bin/env bash
# Damages a stopped member's WAL the way a bad sector does: 16 random bytes
# in the middle of its records (etcd then dies with "walpb: crc mismatch").
# For trying out repair on a local cluster, e.g.:
#   scripts/corrupt-wal.sh examples/data/node2/etcd
set -euo pipefail
dir=${1:?usage: $0 DATA_DIR}
wal=$(ls "$dir"/member/wal/*.wal | head -1)
# WAL files are preallocated with zeros: the records are the non-zero start.
used=$(head -c 64000000 "$wal" | tr -d '\0' | wc -c)
dd if=/dev/urandom of="$wal" bs=1 seek=$((used / 2)) count=16 conv=notrunc status=none
echo "flipped 16 bytes at offset $((used / 2)) of $wal"

#!/usr/bin/env bash
# comm_collectives.sh BUILD SOURCE - the communication layer (src/comm/) on 1, 2, 3 and 4 ranks
# (local processes, --oversubscribe): every collective against a tree-ordered reference, byte
# counters, error paths (tool_comm_check), the reductions in fp32 and in bf16 (each partial sum
# rounded to bf16, 2 bytes per element on the wire, a short bf16 message named as a mismatch);
# the same bits on a second run and with another chunk size; every all-reduce algorithm (messages:
# reduce-scatter + all-gather, whole-vector exchange; the shared segment) against the reference at
# the sizes around each threshold, odd lengths, 1-4 ranks, and the same digests with the segment
# turned off (ZT_COMM_AR_SHM_BYTES=0); the 2 s deadline naming the rank that skipped a collective
# (also through the shared segment). About 100 s of CPU (3.5 min on the shared machine at load 10).
set -euo pipefail
BUILD="$1"; SRC="$2"
TOOL="$BUILD/tests/tool_comm_check"
test -x "$TOOL" || { echo "missing $TOOL (build the tests first)"; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT

run() { # run N OUT [args]: the tool on N ranks (N = 1: a singleton, no mpirun)
    local n="$1" out="$2"; shift 2
    if [ "$n" = 1 ]; then timeout 120 "$TOOL" "$@" >"$out" 2>&1
    else timeout 120 mpirun --oversubscribe -x ZT_COMM_CHUNK_BYTES -x ZT_COMM_TIMEOUT -x ZT_COMM_AR_SHM_BYTES \
        -x ZT_COMM_AR_EXCHANGE_BYTES -np "$n" "$TOOL" "$@" >"$out" 2>&1
    fi
}
digests() { grep '^digest ' "$1" | sort; }

export ZT_COMM_CHUNK_BYTES= ZT_COMM_TIMEOUT= ZT_COMM_AR_SHM_BYTES= ZT_COMM_AR_EXCHANGE_BYTES=
for n in 1 2 3 4; do
    if ! run "$n" "$tmp/a$n"; then cat "$tmp/a$n"; echo "FAIL: collectives on $n ranks"; exit 1; fi
    tail -n1 "$tmp/a$n"
    grep -q "^comm_check: $n ranks: [0-9]* checks, 0 failed" "$tmp/a$n" || { cat "$tmp/a$n"; exit 1; }
    run "$n" "$tmp/b$n" || { cat "$tmp/b$n"; echo "FAIL: second run on $n ranks"; exit 1; }
    if [ "$(digests "$tmp/a$n")" != "$(digests "$tmp/b$n")" ] || [ -z "$(digests "$tmp/a$n")" ]; then
        digests "$tmp/a$n"; digests "$tmp/b$n"; echo "FAIL: two runs on $n ranks gave different bits"; exit 1
    fi
done
echo "same bits on a second run: ok"

# another chunk size cuts the messages differently but must not change one bit
ZT_COMM_CHUNK_BYTES=64k run 4 "$tmp/c4" || { cat "$tmp/c4"; echo "FAIL: 64k chunks"; exit 1; }
if [ "$(digests "$tmp/a4")" != "$(digests "$tmp/c4")" ]; then
    echo "FAIL: ZT_COMM_CHUNK_BYTES=64k changed the bits"; exit 1
fi
echo "same bits with 64 KiB chunks: ok"

# no shared segment: AUTO sends every all-reduce by messages (on 2 ranks the whole-vector
# exchange up to 16 MB instead of 64 KB), and the bits must not move
for n in 2 3; do
    ZT_COMM_AR_SHM_BYTES=0 ZT_COMM_AR_EXCHANGE_BYTES=16M run "$n" "$tmp/s$n" || { cat "$tmp/s$n"; echo "FAIL: no segment on $n ranks"; exit 1; }
    grep -q "^comm_check: $n ranks: [0-9]* checks, 0 failed" "$tmp/s$n" || { cat "$tmp/s$n"; exit 1; }
    if [ "$(digests "$tmp/a$n")" != "$(digests "$tmp/s$n")" ]; then
        echo "FAIL: ZT_COMM_AR_SHM_BYTES=0 ZT_COMM_AR_EXCHANGE_BYTES=16M changed the bits on $n ranks"; exit 1
    fi
done
echo "same bits without the shared segment, the exchange up to 16 MB: ok"

# a malformed setting is a usage error, not a hang
if ZT_COMM_TIMEOUT=soon "$TOOL" >"$tmp/e" 2>&1; then echo "FAIL: ZT_COMM_TIMEOUT=soon accepted"; exit 1; fi
grep -q "ZT_COMM_TIMEOUT='soon'" "$tmp/e" || { cat "$tmp/e"; exit 1; }
for v in ZT_COMM_AR_SHM_BYTES ZT_COMM_AR_EXCHANGE_BYTES; do
    if env "$v=lots" "$TOOL" >"$tmp/e" 2>&1; then echo "FAIL: $v=lots accepted"; exit 1; fi
    grep -q "$v='lots'" "$tmp/e" || { cat "$tmp/e"; exit 1; }
done

# the deadline: the last rank skips a reduce-scatter and a max; the others fail after 2 s,
# naming it
for n in 2 4; do
    start=$(date +%s)
    if ! run "$n" "$tmp/t$n" --timeout; then cat "$tmp/t$n"; echo "FAIL: timeout test on $n ranks"; exit 1; fi
    cat "$tmp/t$n" | grep -v '^comm_check: [0-9]* ranks, thread'
    grep -q "no data from rank $((n - 1)) after 2 s" "$tmp/t$n" || { echo "FAIL: no peer named"; exit 1; }
    [ $(( $(date +%s) - start )) -lt 30 ] || { echo "FAIL: the timeout test took too long"; exit 1; }
done
echo "comm_collectives: ok"

#!/usr/bin/env bash
# isa_paths.sh BUILD SOURCE - the instruction-set levels end to end (docs/design.md, "Instruction
# sets"), on whatever CPU runs the suite:
#  1. bad input: ZT_ISA naming no level, a level the CPU lacks (amx here unless it has AMX; with
#     ZT_CPU_FAKE=avx2 pretending an AVX2-only CPU, avx512 too), a CPU below the floor
#     (ZT_CPU_FAKE=none): exit 2 with a message naming what is missing, never a crash;
#  2. the avx2 level (what an AVX2-only CPU runs, here masked by ZT_ISA): bf16 mixed training with
#     its products widened to fp32 gives the same bits under ddp, zero1, zero2, zero3 and hybrid, and
#     1 x GA 4 = 2 x GA 2 (the strategy never changes the math, on this path too);
#  3. `zerotrain train` under ZT_ISA=avx2: the banner and the JSONL name the level and the GEMM
#     path, and its bf16 loss curve agrees with the CPU's best level's to bf16's tolerance (the two
#     paths differ only in the order of fp32 sums: checked within 1e-3 over 20 steps);
#  4. `zerotrain version` names the CPU, its features, the level and the GEMM paths.
set -uo pipefail
BUILD="$1"
SRC="${2:-$(dirname "$0")/..}"
Z="$BUILD/zerotrain" TOOL="$BUILD/tests/tool_dist_check"
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ZT_COMM_TIMEOUT=120
unset ZT_ISA ZT_CPU_FAKE
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
source "$SRC/tests/dist_check.bash"

# ---- 1. bad input ------------------------------------------------------------------------------
expect2() { # label expected-text env... -- zerotrain args...
  local label="$1" want="$2"; shift 2
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  local out rc=0
  out="$(env "${envs[@]}" "$Z" "$@" 2>&1)" || rc=$?
  if [ $rc -eq 2 ] && grep -qF -- "$want" <<<"$out"; then echo "ok   $label: exit 2: $(grep -m1 -F -- "$want" <<<"$out" | cut -c1-150)"
  else echo "FAIL $label: exit $rc, expected 2 and '$want':"; echo "$out" | tail -3; fail=1; fi
}
expect2 "ZT_ISA=avx-512 (no such level)" "ZT_ISA: unknown instruction-set level 'avx-512' (expected auto, avx2, avx512, avx512_bf16 or amx)" \
  ZT_ISA=avx-512 -- version
expect2 "ZT_ISA=avx512 on a CPU that has only AVX2" "instruction-set level avx512 needs avx512f avx512bw avx512dq avx512vl avx512cd" \
  ZT_CPU_FAKE=avx2 ZT_ISA=avx512 -- train "$SRC/examples/tiny.yaml" --set training.steps=1
expect2 "a CPU below the floor (no AVX2)" "zerotrain needs at least avx2 (x86-64-v3)" ZT_CPU_FAKE=none -- version
if ! ZT_ISA=amx "$Z" version >/dev/null 2>&1; then
  expect2 "ZT_ISA=amx on a CPU without AMX" "instruction-set level amx needs" ZT_ISA=amx -- version
fi
out="$(ZT_CPU_FAKE=avx2 "$Z" version 2>&1)"
grep -q "kernels  *avx2 (kernels x86-64-v3; the CPU's best)" <<<"$out" && ok_v=1 || ok_v=0
[ $ok_v = 1 ] && echo "ok   an AVX2-only CPU (faked) runs the avx2 kernels as its best" ||
  { echo "FAIL ZT_CPU_FAKE=avx2 version:"; echo "$out" | tail -4; fail=1; }

# ---- 2. the avx2 level: every strategy the same bits in bf16 --------------------------------------
run() { # N args...
  local n="$1"; shift
  ZT_ISA=avx2 mpirun -np "$n" --oversubscribe --bind-to none -x OMP_NUM_THREADS -x ZT_COMM_TIMEOUT -x ZT_ISA \
    "$TOOL" "$@" 2>&1
}
for s in ddp zero1 zero2 zero3; do check "avx2 bf16 N=2 $s" avx2-n2 "$(run 2 $s 1 8 --precision bf16)"; done
check "avx2 bf16 N=2 hybrid (zero3 in groups of 2)" avx2-n2 "$(run 2 hybrid 1 8 --hybrid 2 --precision bf16)"
check "avx2 bf16 N=1 GA=4 zero3" avx2-ga "$(run 1 zero3 4 8 --precision bf16)"
check "avx2 bf16 N=2 GA=2 zero1" avx2-ga "$(run 2 zero1 2 8 --precision bf16)"

# ---- 3. zerotrain train on the avx2 level against the best level -----------------------------------
"$Z" tokenize /usr/share/common-licenses/GPL-3 -o "$tmp/gpl.bin" >/dev/null || { echo "FAIL tokenize"; exit 1; }
train() { # name env...
  local name="$1"; shift
  env "$@" "$Z" train "$SRC/examples/tiny.yaml" --set "data.train=$tmp/gpl.bin" --set data.val= --set eval.every=0 \
    --set training.steps=20 --set sample.tokens=0 --set precision.mode=bf16 --set "logging.jsonl=$tmp/$name.jsonl" \
    > "$tmp/$name.out" 2>&1 || { echo "FAIL train $name: exit $?"; tail -5 "$tmp/$name.out"; fail=1; }
}
train avx2 ZT_ISA=avx2 &
a=$!
train best ZT_ISA=auto
wait $a
if grep -q "| isa avx2 (kernels x86-64-v3.* | gemm fp32 .*, bf16 widened to fp32" "$tmp/avx2.out" &&
   grep -q '"event":"cpu".*"isa":"avx2".*"gemm_bf16":"widened to fp32' "$tmp/avx2.jsonl"; then
  echo "ok   banner and JSONL on avx2: $(grep -m1 '^cpu ' "$tmp/avx2.out" | sed 's/.*| isa/isa/')"
else echo "FAIL the banner or the JSONL does not name the avx2 level and its GEMM path:"; grep -m1 "^cpu " "$tmp/avx2.out"; fail=1; fi
python3 - "$tmp/avx2.jsonl" "$tmp/best.jsonl" <<'EOF' || fail=1
import json, sys
def losses(p):
    return [json.loads(l)["loss"] for l in open(p) if l.startswith('{"step"')]
a, b = losses(sys.argv[1]), losses(sys.argv[2])
if len(a) != 20 or len(b) != 20:
    print(f"FAIL expected 20 steps each, got {len(a)} and {len(b)}"); sys.exit(1)
worst = max(abs(x - y) / abs(y) for x, y in zip(a, b))
if worst > 1e-3:
    print(f"FAIL bf16 on avx2 vs the best level: loss differs by {worst:.2e} relative (> 1e-3)"); sys.exit(1)
print(f"ok   bf16 loss on avx2 vs the best level: worst relative difference {worst:.2e} over 20 steps "
      f"(final {a[-1]:.5f} vs {b[-1]:.5f}){'; the same bits: the best level is avx2 here' if a == b else ''}")
EOF

# ---- 4. version ---------------------------------------------------------------------------------
v="$("$Z" version)"
if grep -q "^  cpu .*family [0-9]* model [0-9]*; avx2 fma" <<<"$v" && grep -q "^  kernels  *avx" <<<"$v" &&
   grep -q "^  gemm  *fp32 .*; bf16 " <<<"$v"; then
  echo "ok   version: $(grep -E '^  (kernels|gemm)' <<<"$v" | tr -s ' ' | tr '\n' ';')"
else echo "FAIL version lacks the cpu/kernels/gemm lines:"; echo "$v"; fail=1; fi
exit $fail

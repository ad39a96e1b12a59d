#!/usr/bin/env bash
# isa_levels.sh - W1 (GPT-2 124M, B=4, T=256, 2 threads) in fp32 and bf16 mixed on every
# instruction-set level this CPU has (docs/design.md "Instruction sets": avx2, avx512,
# avx512_bf16), zerotrain against PyTorch 1.13 fp32 and bf16 autocast on the same level, and the
# GEMM-bound limit measured on that level in the same run (build/bench/gemm_compare, its
# "limit fp32" / "limit bf16" lines). A lower level runs masked on a larger CPU: zerotrain with
# ZT_ISA=LEVEL; PyTorch with ATEN_CPU_CAPABILITY (its own kernels), DNNL_MAX_CPU_ISA (its oneDNN)
# and both sides' OpenBLAS with OPENBLAS_CORETYPE (Haswell for avx2, SkylakeX for avx512), so
# each side runs the instructions an AVX2-only (or AVX-512-without-BF16) CPU would.
#
#   bench/isa_levels.sh [--build DIR] [--steps N (3)] [--warmup W (1)] [--levels "avx2 avx512 ..."]
#                       [--torch-bf16-steps N (as --steps; 0 skips PyTorch's autocast)]
#
# Prints per level: tok/s of each of the four runs, zerotrain / PyTorch (same dtype), zerotrain's
# bf16 step against its fp32 step, each against the limit; then one JSON line per level.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
build="$root/build" steps=3 warmup=1 levels="" tsteps=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build="$(realpath -m "$2")"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    --levels) levels="$2"; shift 2 ;;
    --torch-bf16-steps) tsteps="$2"; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "isa_levels.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
done
tsteps="${tsteps:-$steps}"
zt="$build/zerotrain" gc="$build/bench/gemm_compare"
[ -x "$zt" ] && [ -x "$gc" ] || { echo "isa_levels.sh: build first (cmake --build $build)" >&2; exit 1; }
py=""
for cand in ${PYTHON:-} /usr/bin/python3 python3; do
  command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import torch, numpy' 2>/dev/null && { py="$cand"; break; }
done
[ -n "$py" ] || { echo "isa_levels.sh: no python3 with torch (apt-get install python3-torch, or set PYTHON=)" >&2; exit 1; }
export OMP_NUM_THREADS=2
unset OPENBLAS_CORETYPE ZT_ISA
if [ -z "$levels" ]; then
  for l in avx2 avx512 avx512_bf16; do ZT_ISA=$l "$zt" version >/dev/null 2>&1 && levels="$levels $l"; done
fi
"$zt" version | sed -n 's/^ *\(cpu\|kernels\|gemm\) */  \1: /p' | head -3
echo "levels:$levels; W1 B=4 T=256, $steps timed steps after $warmup warm-up, 2 threads"

json() { python3 -c 'import json,sys
for l in reversed(sys.stdin.read().splitlines()):
    if l.startswith("{"):
        print(json.loads(l).get(sys.argv[1], "")); break' "$1"; }

for lvl in $levels; do
  # both sides' libraries held to the level; at the CPU's best level nothing is held
  case "$lvl" in
    avx2) libs=(DNNL_MAX_CPU_ISA=AVX2 OPENBLAS_CORETYPE=Haswell) aten=avx2 ;;
    avx512) libs=(DNNL_MAX_CPU_ISA=AVX512_CORE OPENBLAS_CORETYPE=SkylakeX) aten=avx512 ;;
    *) libs=() aten="" ;;
  esac
  peer=("${libs[@]}")
  [ -n "$aten" ] && peer+=(ATEN_CPU_CAPABILITY="$aten")
  echo; echo "=== level $lvl (PyTorch with: ${peer[*]:-its own choice})"
  envz=(ZT_ISA="$lvl" "${libs[@]}")
  lim="$(env "${envz[@]}" "$gc" --passes 2 --reps 2 2>/dev/null)"
  grep -m1 "^cpu .*| isa " <<<"$lim" | sed 's/^.*| isa /  gemm_compare: isa /'
  grep "^fp32 FMA micro" <<<"$lim" | sed 's/^/  /'
  l32="$(sed -n 's/^  limit fp32 .*at most \([0-9]*\) tok\/s.*/\1/p' <<<"$lim")"
  l16="$(sed -n 's/^  limit bf16 .*at most \([0-9]*\) tok\/s.*/\1/p' <<<"$lim")"
  declare -A tok=()
  for prec in fp32 bf16; do
    out="$(env "${envz[@]}" "$zt" bench --preset gpt2-124M -B 4 -T 256 --steps "$steps" --warmup "$warmup" \
           --precision "$prec" 2>&1)"
    tok[zt_$prec]="$(json tok_per_s_median <<<"$out")"
    grep -m1 "^cpu .*| isa " <<<"$out" | sed "s/^.*| isa /  zerotrain $prec: isa /"
    ts="$steps"; [ "$prec" = bf16 ] && ts="$tsteps"
    if [ "$ts" -gt 0 ]; then
      out="$(env "${peer[@]}" "$py" "$here/torch_gpt2.py" --preset gpt2-124M -B 4 -T 256 --steps "$ts" \
             --warmup "$warmup" --dtype "$prec" --threads 2 2>&1)"
      tok[pt_$prec]="$(json tok_per_s_median <<<"$out")"
    else tok[pt_$prec]=""; fi
  done
  python3 - "$lvl" "${tok[zt_fp32]}" "${tok[zt_bf16]}" "${tok[pt_fp32]}" "${tok[pt_bf16]}" "$l32" "$l16" <<'EOF'
import json, sys
lvl, *v = sys.argv[1:]
zf, zb, pf, pb, l32, l16 = [float(x) if x else None for x in v]
r = lambda a, b: f"{a / b:.2f}x" if a and b else "n/a"
p = lambda a, b: f"{100 * a / b:.1f}%" if a and b else "n/a"
print(f"  zerotrain fp32 {zf} tok/s = {r(zf, pf)} PyTorch fp32 ({pf}), {p(zf, l32)} of the fp32 limit ({l32})")
print(f"  zerotrain bf16 {zb} tok/s = {r(zb, pb)} PyTorch autocast ({pb}), {p(zb, l16)} of the bf16 limit ({l16})")
print(f"  zerotrain bf16 step / fp32 step: {r(zf, zb) if zf and zb else 'n/a'} (<= 1.00x: bf16 no slower)")
print(json.dumps({"level": lvl, "zt_fp32": zf, "zt_bf16": zb, "torch_fp32": pf, "torch_bf16": pb,
                  "limit_fp32": l32, "limit_bf16": l16}))
EOF
done

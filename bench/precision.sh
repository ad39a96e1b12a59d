#!/usr/bin/env bash
# precision.sh - W1 (GPT-2 124M, B=4, T=256, 2 threads) in fp32 and in bf16 mixed precision, zerotrain
# beside PyTorch 1.13 (fp32, and bf16 under torch.autocast('cpu')), in one command: the four runs
# alternate per round (never two at once), then a table with the issue's two ratios:
#   zerotrain bf16 / PyTorch bf16 autocast (goal >= 2x) and zerotrain bf16 / zerotrain fp32 (goal
#   >= 4x on AMX), and zerotrain bf16's achieved GFLOP/s against the bf16 peak of this CPU.
# --preset llama-124M does the same for the Llama of GPT-2 124M's size (issue 17's goals: >= 1.5x
# fp32, >= 1.8x bf16 autocast); --goals F,B sets the two goals printed beside the ratios.
#
#   bench/precision.sh [--preset P] [--steps N] [--warmup W] [--rounds R] [--threads P] [--skip-build]
#                      [--build DIR] [--goals 1.5,1.8] [--gemm-limit] [--log FILE]
#
# It runs bench/w1.sh twice per round (--zt-args "--precision bf16" --torch-dtype bf16, and the
# fp32 pair) and reads their final JSON lines. Medians over rounds and the best round (this VM is
# shared: the best is the least disturbed) are both printed, with the other processes' CPU use per
# run. --gemm-limit then runs build/bench/gemm_compare --model P (gpt2-124M or llama-124M): the
# time one step's Linear GEMMs take at the best measured rates, i.e. the tok/s a step could reach
# if nothing but its GEMMs ran, in fp32 and bf16. Each side also reports its process's CPU time per
# step / threads ("tok per CPU-second"): its own work, which other programs inflate much less than
# the wall time (a second, load-robust comparison). --log FILE keeps every run's full output.
# Environment as w1.sh (OPENBLAS_CORETYPE left as is).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
args=() rounds=1 preset=gpt2-124M goals="" gemm=0 build="$here/../build" logfile=""
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --preset) preset="$2"; args+=("$1" "$2"); shift 2 ;;
    --goals) goals="$2"; shift 2 ;;
    --gemm-limit) gemm=1; shift ;;
    --log) logfile="$2"; shift 2 ;;
    --build) build="$2"; args+=("$1" "$2"); shift 2 ;;
    --skip-build) args+=("$1"); shift ;;
    --steps|--warmup|--threads) args+=("$1" "$2"); shift 2 ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "precision.sh: unknown option $1" >&2; exit 1 ;;
  esac
done
case "$preset" in llama*) goals="${goals:-1.5,1.8}" ;; *) goals="${goals:-,2}" ;; esac
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
for r in $(seq 1 "$rounds"); do
  echo "=== round $r/$rounds: bf16" >&2
  bash "$here/w1.sh" "${args[@]}" --zt-args "--precision bf16" --torch-dtype bf16 | tee -a "$tmp/log" | tail -1 >> "$tmp/bf16.json"
  echo "=== round $r/$rounds: fp32" >&2
  bash "$here/w1.sh" "${args[@]}" --torch-dtype fp32 | tee -a "$tmp/log" | tail -1 >> "$tmp/fp32.json"
done
[ -z "$logfile" ] || cp "$tmp/log" "$logfile"
if [ "$gemm" = 1 ]; then
  [ -x "$build/bench/gemm_compare" ] || { echo "precision.sh: no $build/bench/gemm_compare (cmake --build build --target gemm_compare)" >&2; exit 1; }
  echo "=== GEMM limit: $build/bench/gemm_compare --model $preset" >&2
  "$build/bench/gemm_compare" --model "$preset" | tee "$tmp/gemm" >&2
fi
/usr/bin/python3 - "$tmp" "$preset" "$goals" <<'PY'
import json, os, re, statistics, sys
d, preset, goals = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
def load(n): return [json.loads(l) for l in open(f"{d}/{n}.json") if l.startswith("{")]
b, f = load("bf16"), load("fp32")
def med(rs, k):
    v = [r[k] for r in rs if isinstance(r.get(k), (int, float))]
    return statistics.median(v) if v else float("nan")
def best(rs, k):
    v = [r[k] for r in rs if isinstance(r.get(k), (int, float))]
    return max(v) if v else float("nan")
cpu, core = (b or f)[0].get("cpu", "?"), (b or f)[0].get("openblas_coretype_env", "?")
print(f"\n{preset}, B=4, T=256; CPU {cpu}; OPENBLAS_CORETYPE={core}; {len(b)} round(s), interleaved "
      "(bf16 pair, fp32 pair per round)")
print("\n| run | tok/s median | tok/s best | tok per CPU-s median | other CPUs per run |\n| --- | --- | --- | --- | --- |")
rows = (("zerotrain fp32", f, "zerotrain_tok_per_s", "zerotrain"), ("zerotrain bf16 mixed", b, "zerotrain_tok_per_s", "zerotrain"),
        ("PyTorch fp32", f, "pytorch_tok_per_s", "pytorch"), ("PyTorch bf16 autocast", b, "pytorch_tok_per_s", "pytorch"))
val, cpu_ = {}, {}
for name, rs, k, side in rows:
    runs = [x for r in rs for x in r[side]]
    load_ = " ".join(f"{x['_other_cpus']:.2f}" for x in runs)
    val[name] = (med(rs, k), best(rs, k))
    cpu_[name] = med(runs, "tok_per_cpu_s")
    print(f"| {name} | {val[name][0]:.1f} | {val[name][1]:.1f} | {cpu_[name]:.1f} | {load_} |")
zf, zb, pf, pb = (val[n] for n, *_ in rows)
cf, cb, qf, qb = (cpu_[n] for n, *_ in rows)
def goal(i): return f" (goal >= {goals[i]}x)" if i < len(goals) and goals[i] else ""
print(f"\nzerotrain fp32 / PyTorch fp32:          median {zf[0] / pf[0]:.2f}x, best {zf[1] / pf[1]:.2f}x{goal(0)}")
print(f"zerotrain bf16 / PyTorch bf16 autocast: median {zb[0] / pb[0]:.2f}x, best {zb[1] / pb[1]:.2f}x{goal(1)}")
print(f"zerotrain bf16 / zerotrain fp32:        median {zb[0] / zf[0]:.2f}x, best {zb[1] / zf[1]:.2f}x")
print(f"per CPU-second of each process: fp32 {cf / qf:.2f}x, bf16 {cb / qb:.2f}x (zerotrain / PyTorch)")
print("\nper round (each pair ran back to back; other CPUs in brackets):")
for i, (rb, rf) in enumerate(zip(b, f)):
    def pair(r):
        z, p = r["zerotrain"][0], r["pytorch"][0]
        return (f"{z['tok_per_s_median']:.1f} [{z['_other_cpus']:.2f}] / {p['tok_per_s_median']:.1f} "
                f"[{p['_other_cpus']:.2f}] = {z['tok_per_s_median'] / p['tok_per_s_median']:.2f}x")
    print(f"  round {i + 1}: fp32 {pair(rf)};  bf16 {pair(rb)}")
zrun = [x for r in b for x in r["zerotrain"]]
gf, peak = best(zrun, "gflops"), med(zrun, "bf16_peak_gflops")
print(f"zerotrain bf16 (best): {gf:.0f} GFLOP/s = {100 * gf / peak:.1f}% of the measured bf16 peak {peak:.0f} GFLOP/s")
lim = {}
if os.path.exists(f"{d}/gemm"):
    for line in open(f"{d}/gemm"):
        m = re.match(r"\s+(oneDNN fp32|OpenBLAS fp32|oneDNN bf16|limit fp32|limit bf16)\s+([0-9.]+) ms .* at most ([0-9]+) tok/s", line)
        if m:
            lim[m.group(1)] = float(m.group(3))
    if "limit bf16" in lim:  # each product the faster of oneDNN's plain call and the trainer's own
        lim["oneDNN bf16"] = lim["limit bf16"]
    if lim:
        l32 = max(v for k, v in lim.items() if "fp32" in k)
        print(f"GEMM-bound limit (the Linear GEMMs alone at their best measured rates): fp32 {l32:.0f} tok/s "
              f"(zerotrain fp32 best at {100 * zf[1] / l32:.0f}% of it)"
              + (f", bf16 {lim['oneDNN bf16']:.0f} tok/s (zerotrain bf16 best at {100 * zb[1] / lim['oneDNN bf16']:.0f}%)"
                 if "oneDNN bf16" in lim else ""))
print(json.dumps({"workload": "W1-precision", "preset": preset, "cpu": cpu, "openblas_coretype_env": core,
                  "zt_fp32": zf[0], "zt_bf16": zb[0], "torch_fp32": pf[0], "torch_bf16": pb[0],
                  "best": {"zt_fp32": zf[1], "zt_bf16": zb[1], "torch_fp32": pf[1], "torch_bf16": pb[1]},
                  "tok_per_cpu_s": {"zt_fp32": cf, "zt_bf16": cb, "torch_fp32": qf, "torch_bf16": qb},
                  "fp32_vs_torch_fp32": round(zf[0] / pf[0], 3), "bf16_vs_torch_bf16": round(zb[0] / pb[0], 3),
                  "bf16_vs_fp32": round(zb[0] / zf[0], 3), "zt_bf16_gflops": gf, "bf16_peak_gflops": peak,
                  "gemm_limit_tok_per_s": lim, "rounds": len(b)}))
PY

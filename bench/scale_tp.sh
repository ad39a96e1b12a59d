#!/usr/bin/env bash
# scale_tp.sh [BUILD] - the scale model's tensor parallelism (`zerotrain plan --tp`, docs/scale.md)
# against a measured tp 2 step on this machine: 2 local ranks, GPT-2 (gpt2-124M, B x T per
# micro-batch, fp32, AdamW), `zerotrain bench --nproc 2 --tp 2` (one tp group of 2, one
# data-parallel rank) and, beside it, `--nproc 2` ddp (2 data-parallel ranks, no tp):
#   1. build/bench/link_bw measures the 2 ranks' link as MPI sees it (bandwidth each way of an
#      exchange of --mb MB, the size of one tp all-reduce's activation here, and the 8-byte latency);
#   2. per run, the share of a core 2 busy processes get just before it (the machine is shared);
#   3. `zerotrain plan --gpu cpu --tp T --pp 1 --cpu-share SHARE` with those links predicts the step
#      (plan times the engine's GEMMs at the cut model's shapes, its kernels and optimizer itself);
#   4. `zerotrain bench` measures it (median of STEPS after WARMUP), with the bytes rank 0 sent in
#      its tp group against the model's (docs/parallelism.md's formula);
#   5. plan again with the bandwidth zerotrain's own all-reduce of that size reached alone (link_bw);
#   6. the step's CPU time on rank 0's thread (what the step cost, however the core was shared)
#      against the prediction at a full core (--cpu-share 1): the model without the share's noise.
# Env: STEPS (3), WARMUP (1), B (4), T (128), PRESET (gpt2-124M). Prints a markdown table.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$(cd "${1:-$ROOT/build}" && pwd)"
STEPS="${STEPS:-3}" WARMUP="${WARMUP:-1}" B="${B:-4}" T="${T:-128}" PRESET="${PRESET:-gpt2-124M}"
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ZT_COMM_TIMEOUT=1200
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
echo "scale_tp: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), cpu family" \
     "$(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | tr -d ' '), $(getconf _NPROCESSORS_ONLN) CPUs," \
     "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}; $PRESET B=$B T=$T, fp32, median of $STEPS steps after $WARMUP;" \
     "load $(cut -d' ' -f1-3 /proc/loadavg); $(date -u +%FT%TZ)"
source "$ROOT/bench/cpu_share.bash"
mb=$(python3 -c "print(max(1, round($B * $T * 768 * 4 / 2**20)))")
mpirun -np 2 --bind-to none "$BUILD/bench/link_bw" --mb "$mb" --reps 5 2>/dev/null | grep "^{" > "$OUT/link.json" || true
[ -s "$OUT/link.json" ] || { echo "scale_tp: link_bw gave nothing" >&2; exit 1; }
for run in tp ddp; do
  args=(--strategy ddp); [ $run = tp ] && args+=(--tp 2)
  share 2 > "$OUT/share-$run"
  "$BUILD/zerotrain" bench --preset "$PRESET" -B "$B" -T "$T" --steps "$STEPS" --warmup "$WARMUP" --nproc 2 \
    "${args[@]}" 2>&1 | grep "^{" | tail -1 > "$OUT/bench-$run.json"
  cut -d' ' -f1-3 /proc/loadavg > "$OUT/load-$run"
done
python3 - "$OUT" "$BUILD/zerotrain" "$B" "$T" "$PRESET" <<'PY'
import json, subprocess, sys
out, zt, B, T, preset = sys.argv[1:6]
link = json.load(open(f"{out}/link.json"))
S = link["mb"] * 1e6
eff = S / link["all_reduce_s"]  # pairwise all-reduce over 2: 2·S·(p-1)/p = S bytes each way
def plan(tp, share, bw):
    cmd = [zt, "plan", "--gpu", "cpu", "--model", preset, "--nodes", "1", "--gpus-per-node", "2", "--seq", T,
           "--micro-batch", B, "--micro-batches", "1", "--tp", str(tp), "--pp", "1",
           "--intra", f"{bw}B/s", "--intra-latency", f"{link['intra_lat']}s", "--cpu-share", f"{share:.4f}", "--json"]
    j = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    return [r for r in j["rows"] if r["name"] == "ddp"][0]
print(f"\nlink (2 ranks on this host, MPI): {link['intra_bw'] / 1e9:.2f} GB/s each way ({link['mb']:.0f} MB "
      f"exchange), latency {link['intra_lat'] * 1e6:.1f} us; zerotrain's all-reduce of {link['mb']:.0f} MB alone: "
      f"{link['all_reduce_s'] * 1e3:.2f} ms measured, {link['all_reduce_model_s'] * 1e3:.2f} ms modelled from the "
      f"link = an effective {eff / 1e9:.2f} GB/s")
print("\n| run | share of a core | measured step | predicted, link bandwidth | error | predicted, the all-reduce's "
      "own bandwidth | error | measured compute incl. tp (rank 0) | predicted compute + tp | of which tp all-reduces | "
      "CPU time per step (rank 0) | predicted at a full core | error | tp MB sent/step, measured | model |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for run, tp, key in (("tp 2 x dp 1", 2, "tp"), ("ddp: tp 1 x dp 2", 1, "ddp")):
    b = json.load(open(f"{out}/bench-{key}.json"))
    share = float(open(f"{out}/share-{key}").read())
    meas = b["step_ms_median"] / 1e3
    comp_meas = (b["fwd_ms"] + b["bwd_ms"]) / 1e3
    r, r2, full = plan(tp, share, link["intra_bw"]), plan(tp, share, eff), plan(tp, 1.0, eff)
    cpu = b["cpu_step_ms_median"] / 1e3  # the step's CPU time on rank 0's thread: what it cost, however shared
    print(f"| {run} | {share:.2f} | {meas:.2f} s | {r['step_s']:.2f} s | {100 * (r['step_s'] - meas) / meas:+.0f}% | "
          f"{r2['step_s']:.2f} s | {100 * (r2['step_s'] - meas) / meas:+.0f}% | {comp_meas:.2f} s | "
          f"{r2['compute_s'] + r2['tp_s']:.2f} s | {r2['tp_s']:.3f} s | {cpu:.2f} s | {full['step_s']:.2f} s | "
          f"{100 * (full['step_s'] - cpu) / cpu:+.0f}% | {b.get('tp_sent_mb', 0.0):.3f} | "
          f"{r['tp_bytes'] / 1e6:.3f} |")
    print(f"  ({run}: load average {open(f'{out}/load-{key}').read().strip()} after the run)")
PY

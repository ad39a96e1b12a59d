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
#   5. plan again with the share the run's own compute implies (the communication model alone).
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
def plan(tp, share):
    cmd = [zt, "plan", "--gpu", "cpu", "--model", preset, "--nodes", "1", "--gpus-per-node", "2", "--seq", T,
           "--micro-batch", B, "--micro-batches", "1", "--tp", str(tp), "--pp", "1",
           "--intra", f"{link['intra_bw']}B/s", "--intra-latency", f"{link['intra_lat']}s",
           "--cpu-share", f"{share:.4f}", "--json"]
    j = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    return [r for r in j["rows"] if r["name"] == "ddp"][0]
print(f"\nlink (2 ranks, MPI): {link['intra_bw'] / 1e9:.2f} GB/s each way at {link.get('mb', '?')} MB, "
      f"latency {link['intra_lat'] * 1e6:.1f} us")
print("\n| run | share of a core | measured step | predicted | error | measured compute + tp (rank 0) | "
      "predicted compute | predicted tp all-reduces (exposed) | predicted, the run's share | error | "
      "tp MB sent/step, measured | model |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for run, tp in (("tp 2 x dp 1", 2), ("ddp: tp 1 x dp 2", 1)):
    key = "tp" if tp == 2 else "ddp"
    b = json.load(open(f"{out}/bench-{key}.json"))
    share = float(open(f"{out}/share-{key}").read())
    meas = b["step_ms_median"] / 1e3
    comp_meas = (b["fwd_ms"] + b["bwd_ms"]) / 1e3
    r = plan(tp, share)
    comp_pred = r["compute_s"] + r["tp_s"]
    run_share = min(1.0, share * (comp_pred - 0) / comp_meas) if comp_meas > 0 else share
    r2 = plan(tp, run_share)
    tp_mb = b.get("tp_sent_mb", 0.0)
    print(f"| {run} | {share:.2f} | {meas:.2f} s | {r['step_s']:.2f} s | {100 * (r['step_s'] - meas) / meas:+.0f}% | "
          f"{comp_meas:.2f} s | {r['compute_s']:.2f} s | {r['tp_s']:.3f} s | {r2['step_s']:.2f} s (share {run_share:.2f}) | "
          f"{100 * (r2['step_s'] - meas) / meas:+.0f}% | {tp_mb:.3f} | {r['tp_bytes'] / 1e6:.3f} |")
    print(f"  load during the run: {open(f'{out}/load-{key}').read().strip()}", file=sys.stderr)
PY

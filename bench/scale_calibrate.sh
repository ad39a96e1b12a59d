#!/usr/bin/env bash
# scale_calibrate.sh [BUILD] - the scale model (`zerotrain plan`, docs/scale.md) against measured
# steps on this machine: 2 namespace hosts x 2 ranks (scripts/netns_cluster.sh; needs root), for
# each link shape, in one session of the hosts:
#   1. build/bench/link_bw measures the links as MPI sees them (intra-host pair, inter-host per
#      host, latencies) and checks the collective formula alone;
#   2. per strategy, the share of a core 4 busy processes get right now (the machine is shared:
#      other work takes the rest) is measured, and `zerotrain plan --gpu cpu --cpu-share SHARE`
#      is fed it and the links (plan times this machine's GEMMs at gpt2-124M's shapes, its
#      optimizer and elementwise kernels itself) and predicts the step: the prediction;
#   3. `zerotrain bench` measures that strategy's step (median of STEPS after WARMUP), with its
#      compute (forward + backward of rank 0) and the time rank 0 waited for communication;
#   4. plan again with the share the run's own compute implies (predicted compute at a full core
#      / measured compute): the communication and overlap model alone, compute taken from the run;
#      and that prediction's compute + every collective's duration: the step without any overlap.
# Prints one markdown table per shape. Env: SHAPES ("none 1gbit"), STRATEGIES ("ddp zero2 zero3
# hybrid"), STEPS (3), WARMUP (1), B (1), T (64).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$(cd "${1:-$ROOT/build}" && pwd)"
SHAPES="${SHAPES:-none 1gbit}" STRATEGIES="${STRATEGIES:-ddp zero2 zero3 hybrid}"
STEPS="${STEPS:-3}" WARMUP="${WARMUP:-1}" B="${B:-1}" T="${T:-64}"
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ZT_COMM_TIMEOUT=1200
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
echo "scale_calibrate: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), cpu family" \
     "$(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | tr -d ' '), $(getconf _NPROCESSORS_ONLN) CPUs," \
     "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}; gpt2-124M B=$B T=$T, fp32, median of $STEPS steps after $WARMUP; $(date -u +%FT%TZ)"

# what runs while the hosts exist (root namespace; the MPI jobs span the hosts)
cat > "$OUT/inner.sh" <<'EOS'
set -euo pipefail
BUILD="$1" OUT="$2" STEPS="$3" WARMUP="$4" B="$5" T="$6" STRATEGIES="$7" BENCH="$8"
run() { "$ZT_NETNS_MPIRUN" -np 4 --bind-to none -x OMP_NUM_THREADS -x ZT_COMM_TIMEOUT "$@"; }
source "$BENCH/cpu_share.bash"
run "$BUILD/bench/link_bw" --mb 64 --reps 3 | grep "^{" > "$OUT/link.json"
for s in $STRATEGIES; do
  share 4 > "$OUT/share-$s"
  run "$BUILD/zerotrain" bench --preset gpt2-124M -B "$B" -T "$T" --steps "$STEPS" --warmup "$WARMUP" --strategy "$s" \
    2>&1 | grep "^{" | tail -1 > "$OUT/bench-$s.json"
  cut -d' ' -f1-3 /proc/loadavg > "$OUT/load-$s"
done
EOS
for shape in $SHAPES; do
  opts=()
  [ "$shape" != none ] && opts=(--rate "$shape")
  bash "$ROOT/scripts/netns_cluster.sh" "${opts[@]}" exec bash "$OUT/inner.sh" "$BUILD" "$OUT" "$STEPS" "$WARMUP" "$B" "$T" "$STRATEGIES" "$ROOT/bench"
  python3 - "$OUT" "$shape" "$STRATEGIES" "$BUILD/zerotrain" "$B" "$T" <<'EOF'
import json, subprocess, sys
out, shape, strategies, zt, B, T = sys.argv[1], sys.argv[2], sys.argv[3].split(), sys.argv[4], sys.argv[5], sys.argv[6]
link = json.load(open(f"{out}/link.json"))
def plan(share):
    cmd = [zt, "plan", "--gpu", "cpu", "--model", "gpt2-124M", "--nodes", "2", "--gpus-per-node", "2", "--seq", T,
           "--tp", "1", "--pp", "1",
           "--micro-batch", B, "--intra", f"{link['intra_bw']}B/s", "--inter", f"{link['inter_bw_node']}B/s",
           "--intra-latency", f"{link['intra_lat']}s", "--inter-latency", f"{link['inter_lat']}s",
           "--cpu-share", f"{share:.4f}", "--json"]
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
print(f"\n### link {shape}: inter-host {link['inter_bw_node']/1e6:.1f} MB/s per host each way "
      f"(one pair {link['inter_bw_pair']/1e6:.1f}), intra-host {link['intra_bw']/1e9:.2f} GB/s, latency "
      f"{link['inter_lat']*1e6:.0f} / {link['intra_lat']*1e6:.0f} us (inter / intra)")
print(f"collectives alone, 64 MB over 4 ranks, model/measured: all-gather {link['all_gather_model_s']/link['all_gather_s']:.2f}, "
      f"reduce-scatter {link['reduce_scatter_model_s']/link['reduce_scatter_s']:.2f}, "
      f"all-reduce {link['all_reduce_model_s']/link['all_reduce_s']:.2f}")
print("\n| strategy | share of a core (measured before) | measured step | predicted step | error | "
      "measured fwd+bwd (rank 0) | predicted fwd+bwd | measured comm wait (rank 0) | predicted exposed | "
      "predicted step with the run's compute | error | the same without overlap (compute + comm) | error | load |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
res = []
for s in strategies:
    try:
        b = json.load(open(f"{out}/bench-{s}.json"))
    except Exception:
        print(f"| {s} | (bench failed) |" + " |" * 10); continue
    share = float(open(f"{out}/share-{s}").read())
    name = "hybrid/2" if s == "hybrid" else s
    p = plan(share)
    r = {x["name"]: x for x in p["rows"]}[name]
    comp_pred = p["forward_s"] + p["backward_s"]
    comp_meas = (b["fwd_ms"] + b["bwd_ms"]) / 1e3
    run_share = min(1.0, share * comp_pred / comp_meas)
    p2 = plan(run_share)
    r2 = {x["name"]: x for x in p2["rows"]}[name]
    meas = b["step_ms_median"] / 1e3
    serial = r2["compute_s"] + r2["comm_s"] # no overlap at all: every collective after the compute
    print(f"| {name} | {share:.2f} | {meas:.2f} s | {r['step_s']:.2f} s | {100*(r['step_s']-meas)/meas:+.0f}% | "
          f"{comp_meas:.2f} s | {comp_pred:.2f} s | {b['comm_wait_ms']/1e3:.2f} s | {r['exposed_s']:.2f} s | "
          f"{r2['step_s']:.2f} s (share {run_share:.2f}) | {100*(r2['step_s']-meas)/meas:+.0f}% | "
          f"{serial:.2f} s | {100*(serial-meas)/meas:+.0f}% | {open(f'{out}/load-{s}').read().strip()} |")
    res.append({"strategy": name, "share": share, "measured_step_s": meas, "predicted_step_s": r["step_s"],
                "run_share": run_share, "predicted_with_run_compute_s": r2["step_s"], "serial_s": serial, "bench": b})
print("{\"shape\":\"%s\",\"link\":%s,\"results\":%s}" % (shape, json.dumps(link), json.dumps(res)))
EOF
done

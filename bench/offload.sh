#!/usr/bin/env bash
# offload.sh - NVMe offload on workload W1 (GPT-2 124M, B=4, T=256, 1 rank, fp32 AdamW): the step
# time with the optimizer state (m and v, 1 GB) in files against the step time in memory, and the
# I/O rate the offloaded optimizer pass reached against the disk's sequential bandwidth measured
# with dd (O_DIRECT, the same request size and total bytes), one after the other on this machine.
#
#   bench/offload.sh [--dir DIR] [--steps N] [--warmup W] [--rounds R] [--threads P] [--preset NAME]
#                    [-B 4] [-T 256] [--buffers 4] [--buffer-mb 64] [--io-threads 2] [--build DIR]
#                    [--param [--prefetch "1 2 4"] [--max-live ELEMENTS]]
#
# --param: zero3 (one rank) in both runs, and the offloaded run keeps the parameter pieces in
# files too (--offload-param-nvme): its step also reads each unit's pieces ahead of its gather,
# --prefetch units ahead (one offloaded run per depth listed, each against the same in-memory
# run), within --max-live elements of windows (0: no bound), and writes the reduced gradient
# pieces to the files during backward. Per depth it prints the time the step waited for those
# reads and writes (with one rank nothing else hides them: exposed) and the optimizer pass's
# wait, and the planned peak against the measured one and the process's peak RSS.
#
# Per round: `zerotrain bench` in memory, then with --offload-nvme DIR (files under DIR/<run>/,
# removed at exit), then dd: write DIR/dd.bin with bs = one state's chunk (buffer-mb / 2 MiB) and
# oflag=direct, then read it back with iflag=direct (the file is removed). Prints both step times,
# their ratio (the issue's goal: offloaded <= 1.5x), the optimizer pass (updating / waiting on the
# disk), the pass's I/O rate, and the time the disk alone needs for the same bytes at dd's rates
# (reads then writes, not overlapped): pass / that = how close the pass runs to the disk. The last
# line is JSON. DIR defaults to ./runs/offload-bench (it must be on the disk to measure).
#
# Environment: OMP_NUM_THREADS is set to --threads (default 2). The machine is shared: the load
# average before and after each run is printed; rerun when it is above the core count.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
dir="$root/runs/offload-bench" steps=3 warmup=1 rounds=1 threads=2 preset=gpt2-124M B=4 T=256
buffers=4 buffer_mb=64 io_threads=2 build="$root/build" param=0 prefetch=1 max_live=0
die() { echo "offload.sh: $*" >&2; exit 1; }
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) dir="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --preset) preset="$2"; shift 2 ;;
    -B) B="$2"; shift 2 ;;
    -T) T="$2"; shift 2 ;;
    --buffers) buffers="$2"; shift 2 ;;
    --buffer-mb) buffer_mb="$2"; shift 2 ;;
    --io-threads) io_threads="$2"; shift 2 ;;
    --build) build="$(realpath -m "$2")"; shift 2 ;;
    --param) param=1; shift ;;
    --prefetch) prefetch="$2"; shift 2 ;;
    --max-live) max_live="$2"; shift 2 ;;
    -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (try --help)" ;;
  esac
done
zt="$build/zerotrain"
[ -x "$zt" ] || die "no zerotrain at $zt (build it, or pass --build DIR)"
mkdir -p "$dir"
export OMP_NUM_THREADS="$threads"
load() { cut -d' ' -f1 /proc/loadavg; }
json_of() { grep '^{' <<<"$1" | tail -1; }
field() { python3 -c "import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])" "$1" "$2"; }
# dd's rate in bytes/s from its last line ("... copied, 0.8 s, 1.3 GB/s")
dd_rate() { awk '/copied/ {for (i = 1; i <= NF; i++) if ($i == "copied,") t = $(i + 1); b = $1} END {printf "%.0f", b / t}'; }

common=(bench --preset "$preset" -B "$B" -T "$T" --steps "$steps" --warmup "$warmup")
poff=()
if [ "$param" = 1 ]; then common+=(--strategy zero3); poff=(--offload-param-nvme "$dir"); fi
rows=()
[ "$param" = 1 ] || prefetch=1
for r in $(seq 1 "$rounds"); do
  l0="$(load)"; mem="$("$zt" "${common[@]}" 2>&1)" || die "in-memory run failed: $(tail -3 <<<"$mem")"
  jm="$(json_of "$mem")"; [ -n "$jm" ] || die "the in-memory run printed no JSON"
  echo "round $r: in memory: $(grep -m1 'all units' <<<"$mem" | sed 's/^ *all units: //')"
  offs=()
  for d in $prefetch; do
    pd=(); [ "$param" = 1 ] && pd=(--offload-param-prefetch "$d" --offload-param-max-live "$max_live")
    l1="$(load)"; off="$("$zt" "${common[@]}" --offload-nvme "$dir" --offload-buffers "$buffers" \
                        --offload-buffer-mb "$buffer_mb" --offload-io-threads "$io_threads" "${poff[@]}" "${pd[@]}" 2>&1)" \
                  || die "offloaded run failed: $(tail -3 <<<"$off")"
    jo="$(json_of "$off")"; [ -n "$jo" ] || die "the offloaded run printed no JSON"
    offs+=("$jo")
    echo "  offloaded (read-ahead $d, load average $l1 before): $(grep -m1 'all units' <<<"$off" | sed 's/^ *all units: //')"
    grep -E "^offload:|offload per step|memory: planned" <<<"$off" | sed 's/^/    /'
  done
  read_mb="$(field "${offs[0]}" offload_read_mb)"
  bs_mb=$(( buffer_mb / 2 )); [ "$bs_mb" -ge 1 ] || bs_mb=1
  count=$(python3 -c "import math; print(max(1, math.ceil($read_mb / ($bs_mb * 1.048576))))")
  l2="$(load)"
  wrate="$(dd if=/dev/zero of="$dir/dd.bin" bs=${bs_mb}M count="$count" oflag=direct conv=fsync 2>&1 | dd_rate)"
  rrate="$(dd if="$dir/dd.bin" of=/dev/null bs=${bs_mb}M iflag=direct 2>&1 | dd_rate)"
  rm -f "$dir/dd.bin"
  l3="$(load)"
  echo "  load average $l0 / $l2 / $l3 (before in-memory / dd / after)"
  echo "  CPU family $(grep -m1 'cpu family' /proc/cpuinfo | awk '{print $NF}'), OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}, OpenBLAS core $(grep -o 'OpenBLAS core [A-Za-z0-9]*' <<<"$mem" | head -1 | cut -d' ' -f3)"
  for jo in "${offs[@]}"; do
  rows+=("$(python3 - "$jm" "$jo" "$rrate" "$wrate" <<'PY'
import json, sys
m, o = json.loads(sys.argv[1]), json.loads(sys.argv[2])
rr, wr = float(sys.argv[3]), float(sys.argv[4])
g = o.get("offload_gather_read_mb", 0.0)
disk_ms = 1e3 * ((o["offload_read_mb"] + g) * 1e6 / rr + o["offload_write_mb"] * 1e6 / wr)
gw, ww = o.get("offload_gather_wait_ms", 0.0), o.get("offload_grad_write_wait_ms", 0.0)
print(json.dumps({"prefetch": o.get("offload_param_prefetch", 1),
                  "mem_ms": m["step_ms_median"], "off_ms": o["step_ms_median"],
                  "ratio": o["step_ms_median"] / m["step_ms_median"], "pass_ms": o["offload_pass_ms"],
                  "update_ms": o["offload_update_ms"], "wait_ms": o["offload_wait_ms"],
                  "gather_wait_ms": gw, "grad_write_wait_ms": ww, "exposed_io_ms": gw + ww + o["offload_wait_ms"],
                  "io_gbps": o["offload_io_gbps"], "dd_read_gbps": rr / 1e9, "dd_write_gbps": wr / 1e9,
                  "disk_ms": disk_ms, "pass_over_disk": o["offload_pass_ms"] / disk_ms,
                  "read_mb": o["offload_read_mb"], "write_mb": o["offload_write_mb"], "gather_read_mb": g,
                  "mem_planned_mib": m["planned_peak_bytes"] / 2**20, "mem_rss_mib": m["max_rss_bytes"] / 2**20,
                  "planned_mib": o["planned_peak_bytes"] / 2**20, "measured_mib": o["measured_peak_bytes"] / 2**20,
                  "rss_mib": o["max_rss_bytes"] / 2**20}))
PY
)")
  done
done
python3 - "$preset" "$B" "$T" "$threads" "$buffers" "$buffer_mb" "$io_threads" "$max_live" "${rows[@]}" <<'PY'
import json, statistics, sys
preset, B, T, threads, nb, mb, iot, live = sys.argv[1:9]
rows = [json.loads(r) for r in sys.argv[9:]]
depths = sorted({r["prefetch"] for r in rows})
print(f"\n{preset} B={B} T={T}, 1 rank x {threads} threads, {nb} buffers x {mb} MiB, {iot} I/O threads, "
      f"windows bound {live} elements (0: none), {len(rows) // len(depths)} round(s) (medians)")
print("| read-ahead | step in memory | step offloaded | ratio (goal <= 1.5) | optimizer pass (update / wait) | "
      "exposed I/O per step (piece reads + gradient writes + pass wait) | "
      "pass I/O rate | dd read / write (O_DIRECT) | disk time for the same bytes | pass / disk time | "
      "peak planned / measured / RSS (in memory: planned / RSS) |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
out = []
for d in depths:
    rs = [r for r in rows if r["prefetch"] == d]
    med = {k: statistics.median(r[k] for r in rs) for k in rs[0]}
    print(f"| {d} | {med['mem_ms']:.0f} ms | {med['off_ms']:.0f} ms | {med['ratio']:.2f}x | {med['pass_ms']:.0f} ms "
          f"({med['update_ms']:.0f} / {med['wait_ms']:.0f}) | {med['exposed_io_ms']:.0f} ms ({med['gather_wait_ms']:.0f} + "
          f"{med['grad_write_wait_ms']:.0f} + {med['wait_ms']:.0f}) | {med['io_gbps']:.2f} GB/s "
          f"({med['read_mb']:.0f} MB read + {med['write_mb']:.0f} MB written, gathers {med['gather_read_mb']:.0f} MB) | "
          f"{med['dd_read_gbps']:.2f} / {med['dd_write_gbps']:.2f} GB/s | {med['disk_ms']:.0f} ms | {med['pass_over_disk']:.2f} | "
          f"{med['planned_mib']:.0f} / {med['measured_mib']:.0f} / {med['rss_mib']:.0f} MiB "
          f"({med['mem_planned_mib']:.0f} / {med['mem_rss_mib']:.0f}) |")
    med.update(preset=preset, B=int(B), T=int(T), threads=int(threads), buffers=int(nb), buffer_mb=float(mb),
               io_threads=int(iot), max_live=int(live), rounds=len(rs))
    out.append(med)
for med in out: print(json.dumps(med))
PY

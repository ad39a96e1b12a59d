#!/usr/bin/env bash
# long_seq.sh - training throughput and peak memory against the sequence length: GPT-2 124M at
# B (default 1) x T for T in a list (default 256 512 1024 2048 4096), zerotrain with flash
# attention, the same with the loss in chunks (flash-chunk: `--loss-chunk R`, no (B*T, V) logits
# kept; R from --loss-chunk, default 512), zerotrain with naive attention (the (B,NH,T,T)
# probabilities saved) and PyTorch 1.13 eager (bench/torch_gpt2.py), one after the other, never at
# the same time.
#
#   bench/long_seq.sh [--T "256 512 1024 2048 4096"] [-B 1] [--steps 3] [--warmup 1] [--rounds 1]
#                     [--impls "flash naive torch"] (also: flash-chunk) [--loss-chunk 512]
#                     [--threads 2] [--precision fp32|bf16]
#                     [--build DIR] [--out FILE.jsonl] [--plot FILE.png] [--mem-frac 0.8]
#                     [--from FILE.jsonl]   (no runs: the table and plot of an earlier --out)
#
# The preset's context is lengthened to the largest T (wpe rows: --max-seq-len of both sides, so
# the model has 124.4M + (maxT - 1024)·768 parameters at maxT > 1024). Per T, per round, the impls
# alternate in the order given; each prints a final JSON line (tok_per_s_median; zerotrain also the
# planned and measured peak of its memory accounting, both sides the process's peak RSS). A run
# whose memory would not fit is skipped with the reason: zerotrain's is what its planner says for
# flash (the run then reports the plan), for naive and PyTorch the attention matrices they keep,
# counted from their formulas (naive: L·B·NH·T² floats saved plus the same per thread in backward;
# PyTorch eager 1.13: ~3·L·B·NH·T² floats: scores, probabilities, their gradient), against
# --mem-frac of MemAvailable.
# Prints a markdown table (tok/s, CPU time per step, peak RSS, zerotrain's planned/measured peak)
# and, with --out, one JSON line per run; with --plot, a PNG (gnuplot) against T of the tokens per
# CPU-second of a thread (B·T over the step's CPU time per thread: on a shared machine the wall
# time also counts the other tenants; this does far less) and of the peak RSS.
#
# Environment: OMP_NUM_THREADS = --threads for both sides; OPENBLAS_CORETYPE as it is (say which).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
Ts="256 512 1024 2048 4096" B=1 steps=3 warmup=1 rounds=1 impls="flash naive torch" threads=2
precision=fp32 build="$root/build" out="" plot="" memfrac=0.8 from="" losschunk=512
while [ $# -gt 0 ]; do
  case "$1" in
    --T) Ts="$2"; shift 2 ;;
    -B) B="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --impls) impls="$2"; shift 2 ;;
    --loss-chunk) losschunk="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --precision) precision="$2"; shift 2 ;;
    --build) build="$(realpath -m "$2")"; shift 2 ;;
    --out) out="$(realpath -m "$2")"; shift 2 ;;
    --plot) plot="$(realpath -m "$2")"; shift 2 ;;
    --mem-frac) memfrac="$2"; shift 2 ;;
    --from) from="$(realpath -m "$2")"; shift 2 ;;
    -h|--help) sed -n '2,29p' "$0"; exit 0 ;;
    *) echo "long_seq.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
done
for i in $impls; do
  case "$i" in flash|flash-chunk|naive|torch) ;;
    *) echo "long_seq.sh: --impls takes flash, flash-chunk, naive, torch; got '$i'" >&2; exit 2 ;; esac
done
case "$precision" in fp32|bf16) ;; *) echo "long_seq.sh: --precision fp32 or bf16" >&2; exit 2 ;; esac
[ -x "$build/zerotrain" ] || { echo "long_seq.sh: no zerotrain at $build (build it, or --build DIR)" >&2; exit 2; }
py=/usr/bin/python3
if [[ " $impls " == *" torch "* ]] && ! "$py" -c 'import torch' 2>/dev/null; then
  echo "long_seq.sh: /usr/bin/python3 has no torch (apt-get install python3-torch)" >&2; exit 2
fi
[ -z "$plot" ] || command -v gnuplot >/dev/null || { echo "long_seq.sh: --plot needs gnuplot" >&2; exit 2; }
export OMP_NUM_THREADS="$threads"

exec python3 - "$build/zerotrain" "$py" "$here/torch_gpt2.py" "$Ts" "$B" "$steps" "$warmup" "$rounds" \
  "$impls" "$threads" "$precision" "$out" "$plot" "$memfrac" "$from" "$losschunk" <<'PYEOF'
import json, os, shlex, subprocess, sys, time

zt, py, torch_script, Ts, B, steps, warmup, rounds, impls, threads, prec, out, plot, memfrac, src, losschunk = sys.argv[1:]
Ts = [int(t) for t in Ts.split()]
B, rounds, memfrac, nthreads = int(B), int(rounds), float(memfrac), int(threads)
impls = impls.split()
maxT = max(1024, max(Ts))
L, NH = 12, 12  # GPT-2 124M

def mem_available():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0

def cpu_line():
    with open("/proc/cpuinfo") as f:
        info = {}
        for line in f:
            k, _, v = line.partition(":")
            info.setdefault(k.strip(), v.strip())
    flags = info.get("flags", "").split()
    return (f"{info.get('model name', '?')}, cpu family {info.get('cpu family', '?')}, "
            f"{os.cpu_count()} CPUs, avx512f={'avx512f' in flags}, avx512_bf16={'avx512_bf16' in flags}")

def too_big(impl, T):
    att = L * B * NH * T * T * 4
    need = {"naive": att + nthreads * T * T * 4, "torch": 3 * att}.get(impl, 0)
    avail = mem_available()
    if need > memfrac * avail:
        return (f"its attention matrices need ~{need / 2**30:.1f} GiB > {memfrac:.0%} of MemAvailable "
                f"{avail / 2**30:.1f} GiB")
    return None

def run(impl, T):
    if impl == "torch":
        cmd = [py, torch_script, "--preset", "gpt2-124M", "-B", str(B), "-T", str(T), "--steps", steps,
               "--warmup", warmup, "--threads", threads, "--dtype", prec, "--max-seq-len", str(maxT)]
    else:
        cmd = [zt, "bench", "--preset", "gpt2-124M", "-B", str(B), "-T", str(T), "--steps", steps,
               "--warmup", warmup, "--precision", prec, "--attention", impl.split("-")[0], "--max-seq-len", str(maxT)]
        if impl == "flash-chunk":
            cmd += ["--loss-chunk", losschunk]
    print(f"\n=== {impl} T={T}: {' '.join(shlex.quote(c) for c in cmd)}", flush=True)
    t0 = time.time()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = p.stdout.strip().splitlines()
    for line in lines[-5:]:
        print("  " + line[:300], flush=True)
    res = None
    for line in reversed(lines):
        if line.startswith("{"):
            try:
                res = json.loads(line)
                break
            except ValueError:
                pass
    if p.returncode != 0 or res is None:
        return {"impl": impl, "T": T, "error": f"exit {p.returncode}", "tail": lines[-3:]}
    res["impl_label"] = impl
    res["wall_s"] = round(time.time() - t0, 1)
    return res

print(f"long_seq: GPT-2 124M (context {maxT}), B={B}, T in {Ts}, {prec}, {steps} timed steps after "
      f"{warmup} warm-up, {rounds} round(s), OMP_NUM_THREADS={threads}, "
      f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset: auto-detect)')}")
print(f"machine: {cpu_line()}; MemAvailable {mem_available() / 2**30:.1f} GiB at the start")
results = [json.loads(line) for line in open(src)] if src else []
if src:
    Ts = sorted({x["T"] for x in results})
    B = results[0].get("B", B)
for T in Ts if not src else []:
    for r in range(rounds):
        for impl in impls:
            why = too_big(impl, T)
            if why:
                print(f"\n=== {impl} T={T}: skipped: {why}", flush=True)
                results.append({"impl_label": impl, "T": T, "skipped": why})
                continue
            res = run(impl, T)
            res.setdefault("impl_label", impl)
            res["round"] = r + 1
            results.append(res)

def med(vals):
    vals = sorted(v for v in vals if v is not None)
    return vals[len(vals) // 2] if vals else None

print("\n| T | impl | tok/s (median) | CPU ms/step per thread | peak RSS MiB | zerotrain planned / measured peak MiB | note |")
print("| --- | --- | --- | --- | --- | --- | --- |")
rows = []
for T in Ts:
    for impl in impls:
        rs = [x for x in results if x.get("T") == T and x.get("impl_label") == impl]
        ok = [x for x in rs if "tok_per_s_median" in x]
        if not ok:
            note = rs[0].get("skipped") or rs[0].get("error", "no result") if rs else "not run"
            print(f"| {T} | {impl} | - | - | - | - | {note} |")
            rows.append((T, impl, None, None, None))
            continue
        tps = med([x["tok_per_s_median"] for x in ok])
        cpu = med([x.get("cpu_step_ms_median") for x in ok])
        rss = med([x.get("max_rss_bytes") for x in ok])
        plan = ok[0].get("planned_peak_bytes")
        meas = ok[0].get("measured_peak_bytes")
        pm = f"{plan / 2**20:.0f} / {meas / 2**20:.0f}" if plan else "-"
        print(f"| {T} | {impl} | {tps:.1f} | {cpu if cpu is not None else '-'} | {rss / 2**20:.0f} | {pm} | |")
        rows.append((T, impl, tps, rss, B * T / (cpu / 1e3) if cpu else None))

if out:
    with open(out, "w") as f:
        for x in results:
            f.write(json.dumps(x) + "\n")
    print(f"\nwrote {out}")

if plot:
    import tempfile
    d = tempfile.mkdtemp()
    names = {"flash": "zerotrain flash", "flash-chunk": f"zerotrain flash, loss in chunks of {losschunk}",
             "naive": "zerotrain naive", "torch": "PyTorch 1.13 eager"}
    series = []
    for impl in impls:
        path = os.path.join(d, impl + ".dat")
        with open(path, "w") as f:
            for T, i, tps, rss, tpc in rows:
                if i == impl and tps is not None:
                    f.write(f"{T} {tps} {rss / 2**30} {tpc}\n")
        series.append((impl, path))
    gp = os.path.join(d, "plot.gp")
    title = f"GPT-2 124M, B={B}, {prec}, {threads} threads ({cpu_line().split(',')[0]})"
    with open(gp, "w") as f:
        f.write(f"set terminal pngcairo size 1400,560 font ',11'\nset output '{plot}'\n")
        f.write(f"set multiplot layout 1,2 title '{title}'\nset logscale x 2\nset xlabel 'sequence length T'\n")
        f.write("set grid\nset key top left\nset xrange [" + str(min(Ts) / 1.2) + ":" + str(max(Ts) * 1.2) + "]\n")
        f.write("set ylabel 'tokens per CPU-second of a thread'\nset key bottom left\nplot " + ", ".join(
            f"'{p}' using 1:4 with linespoints lw 2 title '{names[i]}'" for i, p in series) + "\n")
        f.write("set ylabel 'peak RSS (GiB)'\nset key top left\nset yrange [0:*]\nplot " + ", ".join(
            f"'{p}' using 1:3 with linespoints lw 2 title '{names[i]}'" for i, p in series) + "\n")
        f.write("unset multiplot\n")
    subprocess.run(["gnuplot", gp], check=True)
    print(f"wrote {plot}")
PYEOF

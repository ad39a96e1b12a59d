#!/usr/bin/env bash
# model_size.sh - training throughput and peak memory against the model size and the ranks: GPT-2
# 124M, 350M and 774M at W1's B=4, T=256, fp32 (or bf16), zerotrain on 1 process x 2 threads and on
# 2 ranks x 1 thread (zero3), and the PyTorch 1.13 peer (bench/torch_gpt2.py) on 2 threads, one
# after the other, each beside the GEMM-bound limit of that size measured in the same run
# (build/bench/gemm_compare --gpt2 L,C,B*T: tok/s if the step did nothing but its Linears).
#
#   bench/model_size.sh [--presets "gpt2-124M gpt2-350M gpt2-774M"] [-B 4] [-T 256] [--steps 3]
#                       [--warmup 1] [--impls "zt zt-x2 torch"] [--precision fp32|bf16]
#                       [--build DIR] [--out FILE.jsonl] [--plot FILE.png] [--from FILE.jsonl]
#
# Ranks: this machine has 2 cores, so 1 process x 2 threads and 2 ranks x 1 thread use the same
# cores; 4 oversubscribed ranks would measure the oversubscription, not the engine, and are not
# run. A run that would not fit in MemAvailable (16 bytes per parameter for fp32 AdamW, plus
# activations) is skipped with the reason.
# Each side prints a final JSON line; the table gives the median wall tok/s and the tokens per
# CPU-second of a thread (B*T over the step's CPU time per thread: on a shared machine the wall time
# also counts the other tenants, this far less), the peak RSS, the wall tok/s against the GEMM limit
# (itself timed by the wall clock: only meaningful on a quiet machine), and both against PyTorch.
# The plot shows tokens per CPU-second and peak RSS against the parameter count.
# Environment: OPENBLAS_CORETYPE as it is (say which).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
presets="gpt2-124M gpt2-350M gpt2-774M" B=4 T=256 steps=3 warmup=1 impls="zt zt-x2 torch" precision=fp32
build="$root/build" out="" plot="" from=""
while [ $# -gt 0 ]; do
  case "$1" in
    --presets) presets="$2"; shift 2 ;; -B) B="$2"; shift 2 ;; -T) T="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;; --warmup) warmup="$2"; shift 2 ;; --impls) impls="$2"; shift 2 ;;
    --precision) precision="$2"; shift 2 ;; --build) build="$(realpath -m "$2")"; shift 2 ;;
    --out) out="$(realpath -m "$2")"; shift 2 ;; --plot) plot="$(realpath -m "$2")"; shift 2 ;;
    --from) from="$(realpath -m "$2")"; shift 2 ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "model_size.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
done
for i in $impls; do
  case "$i" in zt|zt-x2|torch) ;; *) echo "model_size.sh: --impls takes zt, zt-x2, torch; got '$i'" >&2; exit 2 ;; esac
done
case "$precision" in fp32|bf16) ;; *) echo "model_size.sh: --precision fp32 or bf16" >&2; exit 2 ;; esac
[ -n "$from" ] || [ -x "$build/zerotrain" ] || { echo "model_size.sh: no zerotrain at $build" >&2; exit 2; }
[ -z "$plot" ] || command -v gnuplot >/dev/null || { echo "model_size.sh: --plot needs gnuplot" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=passive

exec python3 - "$build" "$here/torch_gpt2.py" "$presets" "$B" "$T" "$steps" "$warmup" "$impls" "$precision" \
  "$out" "$plot" "$from" <<'PYEOF'
import json, os, re, shlex, subprocess, sys, time

build, torch_script, presets, B, T, steps, warmup, impls, prec, out, plot, src = sys.argv[1:]
presets, impls, B, T = presets.split(), impls.split(), int(B), int(T)
SHAPES = {"gpt2-124M": (12, 12, 768), "gpt2": (12, 12, 768), "gpt2-350M": (24, 16, 1024),
          "gpt2-774M": (36, 20, 1280), "gpt2-1558M": (48, 25, 1600)}
V, maxT = 50257, 1024
for p in presets:
    if p not in SHAPES:
        sys.exit(f"model_size.sh: --presets: {p} is not one of {', '.join(SHAPES)}")

def params(p):
    L, _, C = SHAPES[p]
    return V * C + maxT * C + L * (12 * C * C + 13 * C) + 2 * C

def mem_available():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0

def cpu_line():
    info = {}
    with open("/proc/cpuinfo") as f:
        for line in f:
            k, _, v = line.partition(":")
            info.setdefault(k.strip(), v.strip())
    return f"{info.get('model name', '?')}, cpu family {info.get('cpu family', '?')}, {os.cpu_count()} CPUs"

def last_json(text):
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                pass
    return None

def run(impl, p):
    common = ["-B", str(B), "-T", str(T), "--steps", steps, "--warmup", warmup]
    env = dict(os.environ, OMP_NUM_THREADS="1" if impl == "zt-x2" else "2")
    if impl == "torch":
        cmd = ["/usr/bin/python3", torch_script, "--preset", p, *common, "--threads", "2", "--dtype", prec]
    else:
        cmd = [f"{build}/zerotrain", "bench", "--preset", p, *common, "--precision", prec]
        if impl == "zt-x2":
            cmd += ["--nproc", "2", "--strategy", "zero3"]
    print(f"\n=== {impl} {p}: {' '.join(shlex.quote(c) for c in cmd)}", flush=True)
    t0 = time.time()
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    for line in r.stdout.strip().splitlines()[-3:]:
        print("  " + line[:300], flush=True)
    res = last_json(r.stdout)
    if r.returncode != 0 or res is None:
        return {"error": f"exit {r.returncode}"}
    res["wall_s"] = round(time.time() - t0, 1)
    return res

def gemm_limit(p):
    L, _, C = SHAPES[p]
    cmd = [f"{build}/bench/gemm_compare", "--gpt2", f"{L},{C},{B * T}", "--passes", "2", "--reps", "2"]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                       env=dict(os.environ, OMP_NUM_THREADS="2"))
    lib = "limit bf16" if prec == "bf16" else "limit fp32"  # each product the faster of the two ways
    m = re.search(rf"^  {lib} .*at most (\d+) tok/s", r.stdout, re.M)
    return float(m.group(1)) if m else None

print(f"model_size: {', '.join(presets)}, B={B} T={T}, {prec}, {steps} timed steps after {warmup} warm-up; "
      f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset: auto-detect)')}")
print(f"machine: {cpu_line()}; MemAvailable {mem_available() / 2**30:.1f} GiB at the start", flush=True)
results = [json.loads(line) for line in open(src)] if src else []
for p in presets if not src else []:
    lim = gemm_limit(p)
    results.append({"preset": p, "impl_label": "limit", "tok_per_s_median": lim, "tok_per_cpu_s": lim})
    print(f"\n=== GEMM-bound limit {p}: {lim} tok/s", flush=True)
    for impl in impls:
        need = 16 * params(p) * (1.6 if impl == "torch" else 1.3)
        if need > 0.85 * mem_available():
            why = f"needs ~{need / 2**30:.1f} GiB > 85% of MemAvailable {mem_available() / 2**30:.1f} GiB"
            print(f"\n=== {impl} {p}: skipped: {why}", flush=True)
            results.append({"preset": p, "impl_label": impl, "skipped": why})
            continue
        res = run(impl, p)
        res.update({"preset": p, "impl_label": impl})
        results.append(res)

def find(p, impl):
    return next((x for x in results if x.get("preset") == p and x.get("impl_label") == impl), {})

print("\n| model | params | impl | tok/s | tok per CPU-s | peak RSS GiB | tok/s / GEMM limit | wall / PyTorch "
      "| CPU / PyTorch |")
print("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
rows = []
for p in presets if not src else sorted({x["preset"] for x in results}, key=params):
    lim, pt = find(p, "limit").get("tok_per_s_median"), find(p, "torch")
    print(f"| {p} | {params(p) / 1e6:.0f}M | GEMM limit | {lim or '-'} | | | | | |")
    for impl in impls:
        x = find(p, impl)
        if "tok_per_s_median" not in x:
            print(f"| {p} | | {impl} | - | - | - | | | {x.get('skipped') or x.get('error', 'not run')} |")
            continue
        w, c, rss = x["tok_per_s_median"], x.get("tok_per_cpu_s"), x.get("max_rss_bytes", 0) / 2**30
        f = lambda a, b: f"{a / b:.0%}" if a and b else "-"
        r = lambda a, b: f"{a / b:.2f}x" if a and b else "-"
        print(f"| {p} | | {impl} | {w:.1f} | {c or '-'} | {rss:.1f} | {f(w, lim)} | "
              f"{r(w, pt.get('tok_per_s_median'))} | {r(c, pt.get('tok_per_cpu_s'))} |")
        rows.append((p, impl, w, c, rss))

if out:
    with open(out, "w") as fo:
        for x in results:
            fo.write(json.dumps(x) + "\n")
    print(f"\nwrote {out}")

if plot:
    import tempfile
    d = tempfile.mkdtemp()
    names = {"zt": "zerotrain 1 x 2 threads", "zt-x2": "zerotrain zero3 2 ranks x 1 thread",
             "torch": "PyTorch 1.13, 2 threads", "limit": "GEMM-bound limit"}
    series = []
    for impl in ["limit"] + impls:
        path = os.path.join(d, impl + ".dat")
        with open(path, "w") as fo:
            for p in presets if not src else sorted({x["preset"] for x in results}, key=params):
                x = find(p, impl)
                if x.get("tok_per_s_median"):
                    fo.write(f"{params(p) / 1e6} {x['tok_per_s_median']} {x.get('tok_per_cpu_s') or 0} "
                             f"{x.get('max_rss_bytes', 0) / 2**30}\n")
        series.append((impl, path))
    gp = os.path.join(d, "plot.gp")
    with open(gp, "w") as fo:
        fo.write(f"set terminal pngcairo size 1400,560 font ',11'\nset output '{plot}'\n")
        fo.write(f"set multiplot layout 1,2 title 'GPT-2 at B={B}, T={T}, {prec} ({cpu_line()})'\n")
        fo.write("set logscale xy\nset xlabel 'parameters (millions)'\nset grid\nset key bottom left\n")
        fo.write("set ylabel 'tokens per CPU-second of a thread'\nplot " + ", ".join(
            f"'{q}' using 1:3 with linespoints lw 2 title '{names[i]}'" for i, q in series) + "\n")
        fo.write("unset logscale y\nset ylabel 'peak RSS (GiB)'\nset key top left\nset yrange [0:*]\nplot " + ", ".join(
            f"'{q}' using 1:4 with linespoints lw 2 title '{names[i]}'" for i, q in series if i != "limit") + "\n")
        fo.write("unset multiplot\n")
    subprocess.run(["gnuplot", gp], check=True)
    print(f"wrote {plot}")
PYEOF

#!/usr/bin/env bash
# w1.sh - workload W1 side by side: GPT-2 124M training, B=4, T=256, zerotrain vs PyTorch, on this
# machine's CPU, one after the other (never at the same time: they would share the cores).
# --preset llama-124M runs the same workload on the Llama of GPT-2 124M's size (W1-llama).
#
#   bench/w1.sh [--preset gpt2-124M|llama-124M|...] [--steps N] [--warmup W] [--rounds R] [--threads P] [--build DIR]
#               [--torch-dtype fp32|bf16] [--openblas-coretype NAME] [--zt-args "..."]
#               [--torch-args "..."] [--skip-build] [--only zerotrain|pytorch]
#
# Builds zerotrain if needed (cmake, Release, in --build DIR, default ./build), then per round runs
#   DIR/zerotrain bench --preset P -B 4 -T 256 --steps N --warmup W   (+ --zt-args)
#   python3 bench/torch_gpt2.py --preset P -B 4 -T 256 --steps N --warmup W --dtype D
# Each prints a final JSON line with tok_per_s_median. With --rounds R > 1 the two alternate
# (zt, torch, zt, torch, ...) and the median over rounds is reported. Prints both tok/s, the
# ratio zerotrain / PyTorch, and a final JSON line. Exit 1 when a side fails or prints no JSON.
#
# Environment: OMP_NUM_THREADS is set to --threads for both sides. OpenBLAS picks its kernels from
# OPENBLAS_CORETYPE when it loads; this sandbox exports OPENBLAS_CORETYPE=Haswell (AVX2 kernels,
# about half the AVX-512 rate, see bench/RESULTS.md). --openblas-coretype sets it for both sides
# ("auto" unsets it so OpenBLAS detects the CPU); by default the environment is left as it is.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
steps=10 warmup=3 rounds=1 threads=2 build="$root/build" tdtype=fp32 coretype="" zt_args="" preset=gpt2-124M
torch_args="" skip_build=0 only=""

die() { echo "w1.sh: $*" >&2; exit 1; }
while [ $# -gt 0 ]; do
  case "$1" in
    --preset) preset="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --build) build="$(realpath -m "$2")"; shift 2 ;;
    --torch-dtype) tdtype="$2"; shift 2 ;;
    --openblas-coretype) coretype="$2"; shift 2 ;;
    --zt-args) zt_args="$2"; shift 2 ;;
    --torch-args) torch_args="$2"; shift 2 ;;
    --skip-build) skip_build=1; shift ;;
    --only) only="$2"; shift 2 ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "w1.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
done
case "$tdtype" in fp32|bf16) ;; *) echo "w1.sh: --torch-dtype must be fp32 or bf16" >&2; exit 2 ;; esac
case "$only" in ""|zerotrain|pytorch) ;; *) echo "w1.sh: --only zerotrain|pytorch" >&2; exit 2 ;; esac

export OMP_NUM_THREADS="$threads"
if [ "$coretype" = auto ]; then unset OPENBLAS_CORETYPE
elif [ -n "$coretype" ]; then export OPENBLAS_CORETYPE="$coretype"; fi

# ---- zerotrain: build if needed ---------------------------------------------------------------
zt="$build/zerotrain"
if [ "$only" != pytorch ]; then
  if [ "$skip_build" = 0 ]; then
    if [ ! -f "$build/CMakeCache.txt" ]; then
      echo "w1.sh: configuring $build" >&2
      cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >&2 || die "cmake configure failed"
    fi
    echo "w1.sh: building zerotrain in $build" >&2
    cmake --build "$build" --target zerotrain_cli -j "$(nproc)" >&2 || die "build of zerotrain failed"
  fi
  [ -x "$zt" ] || die "no zerotrain binary at $zt (build it, or pass --build DIR)"
fi

# ---- PyTorch: a Python that has torch (Debian's python3-torch is in /usr/bin/python3) ----------
py=""
if [ "$only" != zerotrain ]; then
  for cand in ${PYTHON:-} /usr/bin/python3 python3; do
    if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import torch' 2>/dev/null; then
      py="$(command -v "$cand")"; break
    fi
  done
  [ -n "$py" ] || die "no python3 with torch found (apt-get install python3-torch, or set PYTHON=)"
fi
runner="$(command -v python3 || true)"
[ -n "$runner" ] || runner="$py"
[ -n "$runner" ] || die "python3 is needed to run the comparison"

# ---- run, alternate, compare (stdlib only) ----------------------------------------------------
exec "$runner" - "$zt" "$py" "$here/torch_gpt2.py" "$steps" "$warmup" "$rounds" "$threads" \
  "$tdtype" "$zt_args" "$torch_args" "$only" "$preset" <<'PYEOF'
import json, os, resource, shlex, statistics, subprocess, sys, time

zt, py, torch_script, steps, warmup, rounds, threads, tdtype, zt_args, torch_args, only, preset = sys.argv[1:]
rounds = int(rounds)

def placement():
    """the vCPUs' placement (bench/vcpu_placement: one die or across dies), built beside zerotrain"""
    probe = os.path.join(os.path.dirname(zt), "bench", "vcpu_placement")
    if not os.access(probe, os.X_OK):
        return "placement not probed (no build/bench/vcpu_placement)"
    r = subprocess.run([probe], capture_output=True, text=True)
    return (r.stdout.strip() or r.stderr.strip() or "vcpu_placement printed nothing")

def cpu_family():
    """'family N (model name)' from /proc/cpuinfo: the numbers depend on the CPU a session gets"""
    fam, name = "?", "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k.strip() == "cpu family" and fam == "?":
                    fam = v.strip()
                elif k.strip() == "model name" and name == "?":
                    name = v.strip()
    except OSError:
        pass
    return f"family {fam} ({name})"

def cpu_all():
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:9]]
        return (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return float("nan")

def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime

def run(name, cmd):
    print(f"\n=== {name}: {' '.join(shlex.quote(c) for c in cmd)}\n  before: {placement()}", flush=True)
    a0, c0, t0 = cpu_all(), children_cpu(), time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    for line in p.stdout:
        sys.stdout.write("  " + line)
        sys.stdout.flush()
        lines.append(line.strip())
    rc = p.wait()
    wall = time.perf_counter() - t0
    other = max(0.0, ((cpu_all() - a0) - (children_cpu() - c0)) / wall)
    res = None
    for line in reversed(lines):
        if line.startswith("{"):
            try:
                res = json.loads(line)
            except ValueError:
                continue
            break
    if rc != 0 or res is None or "tok_per_s_median" not in res:
        why = (f"exited with status {rc}" if rc != 0 else
               "printed no final JSON line with tok_per_s_median")
        tail = "\n    ".join(lines[-10:]) or "(no output)"
        sys.exit(f"w1.sh: {name} {why}. Expected a last line like "
                 f'{{"impl":"...","tok_per_s_median":...}}; last lines:\n    {tail}')
    res["_other_cpus"] = round(other, 2)
    print(f"  -> {res['tok_per_s_median']} tok/s (other processes meanwhile: {other:.2f} CPUs)\n"
          f"  after: {placement()}", flush=True)
    return res

common = ["--preset", preset, "-B", "4", "-T", "256", "--steps", steps, "--warmup", warmup]
zt_cmd = [zt, "bench"] + common + shlex.split(zt_args)
pt_cmd = [py, torch_script] + common + ["--dtype", tdtype, "--threads", threads] + shlex.split(torch_args)

cpu = cpu_family()
coretype = os.environ.get("OPENBLAS_CORETYPE") or "(unset: auto-detect)"
print(f"W1: {preset}, B=4, T=256, {steps} timed steps after {warmup} warm-up, {rounds} round(s), "
      f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}, OPENBLAS_CORETYPE={coretype}, CPU {cpu}")
zr, pr = [], []
for r in range(rounds):
    if only != "pytorch":
        zr.append(run(f"zerotrain (round {r + 1}/{rounds})", zt_cmd))
    if only != "zerotrain":
        pr.append(run(f"pytorch {tdtype} (round {r + 1}/{rounds})", pt_cmd))

def med(rs, key):
    vals = [x[key] for x in rs if isinstance(x.get(key), (int, float))]
    return statistics.median(vals) if vals else None

zt_tok, pt_tok = med(zr, "tok_per_s_median"), med(pr, "tok_per_s_median")
print("\n| impl | dtype | tok/s (median) | step ms (median) | GFLOP/s | other CPUs |")
print("| --- | --- | --- | --- | --- | --- |")
for name, rs, dt in (("zerotrain", zr, zr[0].get("dtype", "?") if zr else ""),
                     (f"pytorch {pr[0]['version'] if pr else ''}", pr, tdtype)):
    if not rs:
        continue
    sm, gf = med(rs, "step_ms_median"), med(rs, "gflops")
    print(f"| {name} | {dt} | {med(rs, 'tok_per_s_median'):.1f} | "
          f"{'-' if sm is None else f'{sm:.0f}'} | {'-' if gf is None else f'{gf:.0f}'} | "
          f"{max(x['_other_cpus'] for x in rs):.2f} |")
ratio = zt_tok / pt_tok if zt_tok and pt_tok else None
if ratio is not None:
    print(f"\nzerotrain / pytorch {tdtype}: {ratio:.2f}x  "
          f"({zt_tok:.1f} vs {pt_tok:.1f} tok/s)")
if any(x["_other_cpus"] > 0.2 for x in zr + pr):
    print("NOTE: other programs used CPU during a run; the numbers may be low. Rerun when quiet.")
print(json.dumps({"workload": "W1", "preset": preset, "cpu": cpu, "openblas_coretype_env": coretype,
                  "zerotrain_tok_per_s": zt_tok, "pytorch_tok_per_s": pt_tok,
                  "pytorch_dtype": tdtype, "ratio": None if ratio is None else round(ratio, 3),
                  "rounds": rounds, "steps": int(steps), "warmup": int(warmup),
                  "zerotrain": zr, "pytorch": pr}))
PYEOF

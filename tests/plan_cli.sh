#!/usr/bin/env bash
# plan_cli.sh BUILD SOURCE - `zerotrain plan` (the scale model, docs/scale.md) from the outside:
# the issue's example prints every strategy and hybrid size with tp/pp marked not modelled; its
# memory per device equals `estimate-memory`'s for the same options (both are the engine's plan);
# bad input (unknown model or device, malformed or missing bandwidth, sizes that do not divide)
# exits 2 naming what is wrong; --gpu cpu measures this machine and runs; --json parses.
set -uo pipefail
BUILD="$1"
ZT="$BUILD/zerotrain"
fail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fail=1; }

# 1. the issue's example
out="$("$ZT" plan --model llama-70b --nodes 64 --gpus-per-node 8 --gpu h100 --intra 450GB/s --inter 400Gb/s --ac full 2>&1)"
rc=$?
if [ $rc = 0 ]; then ok "llama-70b on 64 x 8 h100 exits 0"; else bad "llama-70b example exits $rc: $out"; fi
for row in ddp zero1 zero2 zero3 hybrid/8 hybrid/16 hybrid/32 hybrid/64 hybrid/128 hybrid/256; do
  grep -q "^$row " <<<"$out" || bad "no row $row in: $out"
done
grep -q "tp, pp: not modelled" <<<"$out" && ok "rows for every strategy and hybrid size; tp/pp marked not modelled" \
  || bad "tp/pp not marked"

# 2. memory per device = estimate-memory's high-water, same options
json="$("$ZT" plan --model llama-7b --nodes 2 --gpus-per-node 4 --gpu a100 --inter 200Gb/s --seq 2048 \
        --micro-batch 2 --precision bf16 --ac selective --hybrid 4 --threads 1 --json)" || bad "plan --json exits $?"
est="$("$ZT" estimate-memory --model llama-7b --nproc 8 -B 2 -T 2048 --precision bf16 --checkpointing selective \
       --hybrid-shard 4 --threads 1 --json)" || bad "estimate-memory --json exits $?"
python3 - "$json" "$est" <<'EOF' && ok "memory per device equals estimate-memory's for ddp, zero1-3, hybrid/4" || fail=1
import json, sys
plan, est = json.loads(sys.argv[1]), json.loads(sys.argv[2])
rows = {r["name"]: r for r in plan["rows"]}
for name, col in [("ddp", "ddp"), ("zero1", "zero1"), ("zero2", "zero2"), ("zero3", "zero3"), ("hybrid/4", "hybrid")]:
    a, b = rows[name]["memory"], est["strategies"][col]["peak_total"]
    if a != b:
        print(f"FAIL {name}: plan {a} != estimate-memory {b}"); sys.exit(1)
assert plan["devices"] == 8 and plan["grad_accum"] == 1
for r in plan["rows"]:
    assert r["step_s"] > 0 and 0 < r["mfu"] < 1 and r["exposed_s"] >= 0 and r["hidden_s"] >= 0, r
    assert abs(r["step_s"] - r["compute_s"] - r["exposed_s"]) < 1e-6 * r["step_s"], r
EOF

# 3. gradient accumulation from --global-batch
json="$("$ZT" plan --model gpt2-124M --gpus-per-node 4 --gpu h100 --seq 1024 --micro-batch 2 --global-batch 32 --json)"
python3 -c "import json,sys; j=json.loads(sys.argv[1]); assert j['grad_accum'] == 4, j['grad_accum']" "$json" \
  && ok "--global-batch 32 over 4 devices x 2 = 4 micro-batches" || bad "grad_accum from --global-batch"

# 4. bad input: exit 2, the message names it
expect2() {
  local what="$1" needle="$2"; shift 2
  local msg rc
  msg="$("$ZT" plan "$@" 2>&1)"; rc=$?
  if [ $rc = 2 ] && grep -q -- "$needle" <<<"$msg"; then ok "$what: exit 2, names $needle"
  else bad "$what: exit $rc, message: $msg"; fi
}
expect2 "unknown model" "llama-71b" --model llama-71b --gpu h100
expect2 "unknown device" "h1000" --model llama-7b --gpu h1000
expect2 "bandwidth without unit" "--inter" --model llama-7b --nodes 2 --inter 400
expect2 "bandwidth with a bad unit" "400Gb/x" --model llama-7b --nodes 2 --inter 400Gb/x
expect2 "malformed intra" "--intra" --model llama-7b --intra fast
expect2 "malformed latency" "--inter-latency" --model llama-7b --nodes 2 --inter 1gbit --inter-latency 5
expect2 "no --inter across nodes" "--inter" --model llama-7b --nodes 2
expect2 "global batch not a multiple" "--global-batch" --model llama-7b --global-batch 12
expect2 "hybrid size not dividing" "--hybrid" --model llama-7b --nodes 2 --inter 1gbit --hybrid 3
expect2 "efficiency out of range" "--efficiency" --model llama-7b --efficiency 1.5
expect2 "unknown option" "--tp" --model llama-7b --tp 8
expect2 "sequence beyond the context" "--seq" --model gpt2-124M --seq 4096
expect2 "cpu without --intra" "--intra" --model tiny --gpu cpu --gpus-per-node 2
expect2 "--cpu-share off cpu" "--cpu-share" --model llama-7b --cpu-share 0.5
expect2 "missing --model" "--model" --gpu h100

# 5. this machine as the device
out="$("$ZT" plan --model tiny --gpu cpu --nodes 2 --gpus-per-node 2 --intra 1GB/s --inter 1gbit --seq 64 2>&1)"
rc=$?
if [ $rc = 0 ] && grep -q "measured FMA" <<<"$out" && grep -q "^hybrid/2 " <<<"$out"; then ok "--gpu cpu measures and predicts"
else bad "--gpu cpu exits $rc: $out"; fi
exit $fail

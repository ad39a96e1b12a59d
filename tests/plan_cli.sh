#!/usr/bin/env bash
# plan_cli.sh BUILD SOURCE - `zerotrain plan` (the scale model, docs/scale.md) from the outside:
# the issue's example with --tp 1 --pp 1 prints every strategy and hybrid size; searching tp x pp,
# llama-70b on 64 x 8 H100 without recomputation (pure FSDP does not fit) picks tp 8 or pp > 1,
# and the best rows of each strategy are printed; memory per device equals `estimate-memory`'s
# for the same options, --tp included (both are the engine's plan); a pipeline's bubble is
# counted apart and GPipe needs more memory than 1F1B;
# bad input (unknown model or device, malformed or missing bandwidth, sizes that do not divide)
# exits 2 naming what is wrong; --gpu cpu measures this machine and runs; --json parses;
# context parallelism (--cp): memory = estimate-memory --cp's, less per device as cp grows at the
# same tokens per device, the cp bytes by the formula; expert parallelism (--ep): the bytes an
# element per precision and profile, the stored experts' reduction over the edp ranks.
set -uo pipefail
BUILD="$1"
ZT="$BUILD/zerotrain"
fail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fail=1; }

# 1. the issue's example, without tp and pp
out="$("$ZT" plan --model llama-70b --nodes 64 --gpus-per-node 8 --gpu h100 --intra 450GB/s --inter 400Gb/s --ac full \
       --tp 1 --pp 1 2>&1)"
rc=$?
if [ $rc = 0 ]; then ok "llama-70b on 64 x 8 h100 exits 0"; else bad "llama-70b example exits $rc: $out"; fi
for row in ddp zero1 zero2 zero3 hybrid/8 hybrid/16 hybrid/32 hybrid/64 hybrid/128 hybrid/256; do
  grep -qE "^$row +1 +1 +1 " <<<"$out" || bad "no row $row with tp 1, pp 1, 1 micro-batch in: $out"
done
[ $rc = 0 ] && ok "--tp 1 --pp 1: rows for every strategy and hybrid size"

# 1b. the search: without recomputation pure FSDP needs more than 80 GiB; the best fitting row uses
# tp 8 or pp > 1; every strategy shows its best --top rows
json="$("$ZT" plan --model llama-70b --nodes 64 --gpus-per-node 8 --gpu h100 --intra 450GB/s --inter 400Gb/s --json)" \
  || bad "search --json exits $?"
out="$("$ZT" plan --model llama-70b --nodes 64 --gpus-per-node 8 --gpu h100 --intra 450GB/s --inter 400Gb/s --top 2)"
python3 - "$json" "$out" <<'EOF' && ok "search: pure FSDP does not fit, the best row uses tp 8 or pp > 1; 2 rows per strategy" || fail=1
import json, re, sys
j, text = json.loads(sys.argv[1]), sys.argv[2]
rows = j["rows"]
assert j["search"] is True
pts = {(r["tp"], r["pp"]) for r in rows}
assert {1, 2, 4, 8} == {t for t, _ in pts}, pts                      # tp up to the 8 devices per node
assert {1, 2, 4, 8, 16} == {p for _, p in pts}, pts  # pp dividing the 80 blocks (5, 10: not the 512 devices)
z3 = [r for r in rows if r["name"] == "zero3" and r["tp"] == 1 and r["pp"] == 1][0]
assert not z3["fits"], z3
fit = sorted((r for r in rows if r["fits"]), key=lambda r: r["step_s"])
assert fit and (fit[0]["tp"] == 8 or fit[0]["pp"] > 1), fit[:1]
best = re.search(r"^best: (\S+) with tp (\d+), pp (\d+)", text, re.M)
assert best and (best.group(1), int(best.group(2)), int(best.group(3))) == (fit[0]["name"], fit[0]["tp"], fit[0]["pp"]), best
for st in ["ddp", "zero1", "zero2", "zero3"]:
    n = len(re.findall(r"^%s " % st, text, re.M))
    assert n == 2, (st, n)
assert len(re.findall(r"^hybrid/", text, re.M)) == 2
for r in rows:   # the step's parts
    assert abs(r["step_s"] - r["compute_s"] - r["exposed_s"] - r["bubble_s"]) < 1e-5 * r["step_s"], r
    assert (r["bubble_s"] > 0) == (r["pp"] > 1) and (r["tp_s"] > 0) == (r["tp"] > 1), r
    assert r["micro_batches"] * r["dp"] == 512, r                   # the default global batch: devices x 1
EOF

# 1c. tp: memory = estimate-memory --tp's; pp: GPipe keeps every micro-batch, 1F1B pp of them
json="$("$ZT" plan --model llama-7b --nodes 2 --gpus-per-node 4 --gpu a100 --inter 200Gb/s --seq 2048 --tp 2 --pp 1 \
        --hybrid 2 --threads 1 --json)" || bad "plan --tp 2 exits $?"
est="$("$ZT" estimate-memory --model llama-7b --nproc 8 --tp 2 -B 1 -T 2048 --grad-accum 2 --precision bf16 \
       --hybrid-shard 2 --threads 1 --json)" || bad "estimate-memory --tp 2 exits $?"
g1="$("$ZT" plan --model llama-7b --nodes 2 --gpus-per-node 4 --gpu a100 --inter 200Gb/s --seq 2048 --tp 1 --pp 4 \
       --micro-batches 16 --json)"
g2="$("$ZT" plan --model llama-7b --nodes 2 --gpus-per-node 4 --gpu a100 --inter 200Gb/s --seq 2048 --tp 1 --pp 4 \
       --micro-batches 16 --pp-schedule gpipe --json)"
python3 - "$json" "$est" "$g1" "$g2" <<'EOF' && ok "tp 2: memory = estimate-memory --tp 2's; pp 4: GPipe > 1F1B memory, same time" || fail=1
import json, sys
plan, est, f1b, gp = (json.loads(a) for a in sys.argv[1:5])
rows = {r["name"]: r for r in plan["rows"]}
for name, col in [("ddp", "ddp"), ("zero1", "zero1"), ("zero2", "zero2"), ("zero3", "zero3"), ("hybrid/2", "hybrid")]:
    a, b = rows[name]["memory"], est["strategies"][col]["peak_total"]
    assert a == b, (name, a, b)
    assert rows[name]["tp"] == 2 and rows[name]["dp"] == 4 and rows[name]["micro_batches"] == 2
a = {r["name"]: r for r in f1b["rows"]}; b = {r["name"]: r for r in gp["rows"]}
for name in a:
    assert a[name]["micro_batches"] == 16 and a[name]["pp"] == 4
    assert b[name]["memory"] > a[name]["memory"], name
    assert abs(a[name]["step_s"] - b[name]["step_s"]) < 1e-9 * a[name]["step_s"]  # same bubble, same time
    assert abs(a[name]["bubble_s"] / (a[name]["step_s"] - a[name]["exposed_s"]) - 3 / 19) < 0.05, a[name]
EOF

# 2. memory per device = estimate-memory's high-water, same options
json="$("$ZT" plan --model llama-7b --nodes 2 --gpus-per-node 4 --gpu a100 --inter 200Gb/s --seq 2048 \
        --micro-batch 2 --precision bf16 --ac selective --hybrid 4 --threads 1 --tp 1 --pp 1 --json)" || bad "plan --json exits $?"
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
json="$("$ZT" plan --model gpt2-124M --gpus-per-node 4 --gpu h100 --seq 1024 --micro-batch 2 --global-batch 32 --tp 1 --pp 1 --json)"
python3 -c "import json,sys; j=json.loads(sys.argv[1]); assert j['grad_accum'] == 4, j['grad_accum']" "$json" \
  && ok "--global-batch 32 over 4 devices x 2 = 4 micro-batches" || bad "grad_accum from --global-batch"

# 3b. context parallelism: memory = estimate-memory --cp's; llama3-8b at 32k on 8 h100 with full
# recomputation: cp 2 and 4 cut the memory per device and keep tokens/s per device within 10%;
# the cp bytes are the formula's (allgather: 3 (cp-1)/cp S per block, S = B T 2 KV a)
json="$("$ZT" plan --model llama-7b --nodes 1 --gpus-per-node 8 --gpu a100 --seq 4096 --tp 2 --pp 1 --cp 2 \
        --hybrid 2 --threads 1 --json)" || bad "plan --cp 2 exits $?"
est="$("$ZT" estimate-memory --model llama-7b --nproc 8 --tp 2 --cp 2 -B 1 -T 4096 --grad-accum 2 --precision bf16 \
       --hybrid-shard 2 --threads 1 --json)" || bad "estimate-memory --cp 2 exits $?"
c1="$("$ZT" plan --model llama3-8b --seq 32768 --ac full --tp 1 --pp 1 --json)"
c2="$("$ZT" plan --model llama3-8b --seq 32768 --ac full --tp 1 --pp 1 --cp 2 --json)"
c4="$("$ZT" plan --model llama3-8b --seq 32768 --ac full --tp 1 --pp 1 --cp 4 --cp-mode ring --json)"
python3 - "$json" "$est" "$c1" "$c2" "$c4" <<'EOF2' && ok "cp 2: memory = estimate-memory --cp 2's; llama3-8b at 32k: cp 2, cp 4 (ring) less memory, tokens/s per device within 10%, cp bytes = 3 (cp-1)/cp S L" || fail=1
import json, sys
plan, est, c1, c2, c4 = (json.loads(a) for a in sys.argv[1:6])
rows = {r["name"]: r for r in plan["rows"]}
for name, col in [("ddp", "ddp"), ("zero1", "zero1"), ("zero3", "zero3"), ("hybrid/2", "hybrid")]:
    a, b = rows[name]["memory"], est["strategies"][col]["peak_total"]
    assert a == b, (name, a, b)
    assert rows[name]["cp"] == 2 and rows[name]["dp"] == 4 and rows[name]["cp_bytes"] > 0
z = [{r["name"]: r for r in j["rows"]}["zero3"] for j in (c1, c2, c4)]
assert z[0]["cp"] == 1 and z[0]["cp_bytes"] == 0 and z[1]["cp"] == 2 and z[2]["cp"] == 4
assert z[0]["memory"] > z[1]["memory"] > z[2]["memory"], [r["memory"] for r in z]
for r in z[1:]:
    assert abs(r["tokens_per_s"] / z[0]["tokens_per_s"] - 1) < 0.10, (r["tokens_per_s"], z[0]["tokens_per_s"])
S = 1 * 32768 * 2 * (8 * 128) * 2  # B T 2 KV bytes (bf16 activations): 8 KV heads of 128
assert abs(z[1]["cp_bytes"] / (32 * 3 * 0.5 * S) - 1) < 1e-5, z[1]["cp_bytes"]  # JSON: 6 digits
print(f"     llama3-8b 32k zero3 x8: cp 1 {z[0]['memory'] / 2**30:.1f} GiB {z[0]['tokens_per_s']:.0f} tok/s/dev; "
      f"cp 2 {z[1]['memory'] / 2**30:.1f} GiB {z[1]['tokens_per_s']:.0f}; cp 4 ring {z[2]['memory'] / 2**30:.1f} GiB "
      f"{z[2]['tokens_per_s']:.0f}")
EOF2

# 3c. expert parallelism: the header says the bytes an element the all-to-alls send and where the
# experts are stored; JSON: 3/4 of fp32's ep bytes under the engine's bf16 (2+4+2+4), half under
# nccl's (2+2+2+2); the stored experts reduced over the 8/2 edp ranks (zero1), hybrid's whole
ep() { "$ZT" plan --model llama-124M-moe --gpu h100 --seq 1024 --ep 2 --tp 1 --pp 1 --hybrid 4 "$@"; }
txt="$(ep --precision bf16 --profile zerotrain 2>&1)"
grep -q "expert parallel 2: its all-to-alls on the critical path (2+4+2+4 bytes an element).*stored E/2 a device" <<<"$txt" &&
  grep -q "(2+2+2+2 bytes an element)" <<<"$(ep --precision bf16 2>&1)" && ok "--ep 2: the header's bytes an element and stored experts" ||
  bad "--ep 2 header: $(grep -o 'expert parallel[^;]*' <<<"$txt")"
python3 - "$(ep --precision fp32 --profile zerotrain --json)" "$(ep --precision bf16 --profile zerotrain --json)" \
  "$(ep --precision bf16 --json)" <<'EOF2' && ok "--ep 2: ep bytes 16:12:8 (fp32, engine bf16, nccl bf16); zero1's experts reduced over 4 edp ranks, hybrid whole" || fail=1
import json, sys
f32, b16, nccl = ({r["name"]: r for r in json.loads(a)["rows"]} for a in sys.argv[1:4])
assert abs(b16["zero1"]["ep_bytes"] / f32["zero1"]["ep_bytes"] - 0.75) < 1e-5, (b16["zero1"], f32["zero1"])
assert abs(nccl["zero1"]["ep_bytes"] / f32["zero1"]["ep_bytes"] - 0.5) < 1e-5, nccl["zero1"]
El = 3 * 8 * 1024 * 768 * 12 / 2  # a device's experts: w1, w2, w3 of 4 of the 8 a block, 12 blocks
assert f32["zero1"]["edp"] == 4 and abs(f32["zero1"]["edp_reduce_bytes"] / (El * 4 * 3 / 4) - 1) < 1e-5, f32["zero1"]
assert f32["hybrid/4"]["edp"] == 1 and f32["hybrid/4"]["edp_reduce_bytes"] == 0, f32["hybrid/4"]
EOF2

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
expect2 "global batch not a multiple" "--global-batch" --model llama-7b --global-batch 12 --tp 1 --pp 1
expect2 "global batch and micro-batches" "--micro-batches" --model llama-7b --global-batch 16 --micro-batches 2
expect2 "tp not dividing the heads" "--tp 8" --model gpt2-124M --tp 8 --pp 1
expect2 "pp not dividing the blocks" "--pp 5" --model gpt2-124M --pp 5
expect2 "tp x pp not dividing the devices" "--tp 4 x --pp 4" --model llama-7b --tp 4 --pp 4
expect2 "unknown pipeline schedule" "--pp-schedule" --model llama-7b --pp-schedule interleaved
expect2 "hybrid size not dividing" "--hybrid" --model llama-7b --nodes 2 --inter 1gbit --hybrid 3 --tp 1 --pp 1
expect2 "efficiency out of range" "--efficiency" --model llama-7b --efficiency 1.5
expect2 "unknown option" "--sp" --model llama-7b --sp 8
expect2 "sequence beyond the context" "--seq" --model gpt2-124M --seq 4096
expect2 "cpu without --intra" "--intra" --model tiny --gpu cpu --gpus-per-node 2
expect2 "--cpu-share off cpu" "--cpu-share" --model llama-7b --cpu-share 0.5
expect2 "missing --model" "--model" --gpu h100
expect2 "cp not dividing the data-parallel ranks" "--cp 3 does not divide the 8 data-parallel ranks" --model llama-7b --tp 1 --pp 1 --cp 3 --seq 4092
expect2 "cp not dividing the sequence" "2 x 2 does not divide --seq 4094" --model llama-7b --tp 1 --pp 1 --cp 2 --seq 4094
expect2 "ulysses over more parts than heads" "plan: --cp 16: model llama: ulysses over 16 parts needs the heads (32) and key/value heads (8)" --model llama3-8b --gpus-per-node 16 --tp 1 --pp 1 --cp 16 --cp-mode ulysses --seq 32768
expect2 "an unknown cp mode" 'context-parallel mode "zigzag"' --model llama-7b --cp 2 --cp-mode zigzag

# 5. this machine as the device
out="$("$ZT" plan --model tiny --gpu cpu --nodes 2 --gpus-per-node 2 --intra 1GB/s --inter 1gbit --seq 64 2>&1)"
rc=$?
if [ $rc = 0 ] && grep -q "measured FMA" <<<"$out" && grep -q "^hybrid/2 " <<<"$out"; then ok "--gpu cpu measures and predicts"
else bad "--gpu cpu exits $rc: $out"; fi
exit $fail

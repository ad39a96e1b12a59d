#!/usr/bin/env bash
# large_vocab.sh BUILD SOURCE - vocabularies above 65535 ids, end to end (docs/tokenizers.md):
# 1. a synthetic Llama 3 style tokenizer.json (tests/tokenizer_json_ref.py make: 300 merges trained
#    on the GPL, ids 256..69999 filler pieces, so the merged pieces and the added tokens have ids
#    70000..70301, a vocabulary of 70302) tokenizes a text into a uint32 token file (llm.c's
#    Llama 3 header: magic 20240801, version 7) without being asked, holding the Python reference's
#    ids, most of them above 65535;
# 2. --uint32 with a small vocabulary writes the same ids as uint32; without it the file is uint16
#    (20240520, version 1) as before;
# 3. a tiny Llama with vocab_size 70302 trains on the uint32 file (the loss falls by a quarter in 30
#    steps) and `sample --tokenizer` decodes its ids above 65535; GPT-2 tiny (V=50257) on the same
#    file is exit 3 naming the file, the token and its position.
set -euo pipefail
BUILD="$1"; SRC="$2"; Z="$BUILD/zerotrain"; PY=/usr/bin/python3
export ZT_SOURCE_DIR="$SRC" OMP_NUM_THREADS=2
T="$(mktemp -d)"; trap 'rm -rf "$T"' EXIT
GPL=/usr/share/common-licenses/GPL-3
fail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fail=1; }
# header FILE: "magic version count"
header() { $PY -c "import numpy as np,sys; print(*np.fromfile(sys.argv[1], np.int32, count=3))" "$1"; }
ids() { # FILE WIDTH: the ids after the leading end-of-text token, one per line
  $PY -c "import numpy as np,sys; print('\n'.join(map(str, np.fromfile(sys.argv[1], np.uint16 if sys.argv[2] == '2' else np.uint32, offset=1024)[1:])))" "$1" "$2"
}

# ---- 1. a 70302-id tokenizer.json -> uint32 file with the reference's ids ----------------------
$PY "$SRC/tests/tokenizer_json_ref.py" make "$GPL" "$T/big.json" 300 70000
printf 'mid<|end_of_text|><|begin_of_text|>text DON'"'"'T 1234567 naïve café 中文\n' > "$T/text.txt"
cat "$GPL" >> "$T/text.txt"
out="$("$Z" tokenize "$T/text.txt" -o "$T/big.bin" --tokenizer "$T/big.json")"
n=$("$PY" -c "import numpy as np,sys; print(len(np.fromfile(sys.argv[1], np.uint32, offset=1024)))" "$T/big.bin")
h="$(header "$T/big.bin")"
[ "$h" = "20240801 7 $n" ] && grep -q "uint32)" <<<"$out" && [ "$(stat -c %s "$T/big.bin")" = $((1024 + 4 * n)) ] &&
  ok "70302-id tokenizer.json writes uint32 tokens by itself: header $h, $(stat -c %s "$T/big.bin") bytes" ||
  bad "uint32 header: $h, $out"
$PY "$SRC/tests/tokenizer_json_ref.py" encode "$T/big.json" "$T/text.txt" > "$T/ref.txt"
ids "$T/big.bin" 4 > "$T/zt.txt"
above=$(awk '$1 > 65535' "$T/zt.txt" | wc -l)
if cmp -s "$T/ref.txt" "$T/zt.txt" && [ "$above" -gt $((n / 2)) ]; then
  ok "its $((n - 1)) ids = the Python reference's; $above of them above 65535, up to $(sort -n "$T/zt.txt" | tail -1)"
else bad "uint32 ids differ from the reference ($above above 65535)"; diff "$T/ref.txt" "$T/zt.txt" | head -5; fi

# ---- 2. --uint32 on request; uint16 otherwise ------------------------------------------------
$PY "$SRC/tests/tokenizer_json_ref.py" make "$GPL" "$T/small.json" 300
"$Z" tokenize "$T/text.txt" -o "$T/s16.bin" --tokenizer "$T/small.json" >/dev/null
"$Z" tokenize "$T/text.txt" -o "$T/s32.bin" --tokenizer "$T/small.json" --uint32 >/dev/null
h16="$(header "$T/s16.bin")"; h32="$(header "$T/s32.bin")"
if [ "${h16% *}" = "20240520 1" ] && [ "${h32% *}" = "20240801 7" ] && [ "${h16##* }" = "${h32##* }" ] &&
   cmp -s <(ids "$T/s16.bin" 2) <(ids "$T/s32.bin" 4); then
  ok "556-id tokenizer: uint16 file ($h16) by default, --uint32 ($h32) holds the same ids"
else bad "small vocabulary: uint16 $h16, --uint32 $h32"; fi

# ---- 3. a tiny Llama with vocab_size 70302 trains on it; GPT-2's vocabulary is refused -----------
"$Z" tokenize "$GPL" -o "$T/gpl.bin" --tokenizer "$T/big.json" --val-fraction 0.1 >/dev/null
cat > "$T/l.yaml" <<YEOF
model: {preset: llama-tiny, vocab_size: 70302}
data: {train: $T/gpl.bin, val: $T/gpl.val.bin}
training: {micro_batch_size: 4, seq_len: 32, steps: 30, lr: 3e-3, warmup_steps: 5}
eval: {every: 30, batches: 4}
logging: {print_every: 10}
YEOF
if out="$("$Z" train "$T/l.yaml" --save "$T/l.ztw" 2>&1)"; then
  $PY - "$(grep '^done:' <<<"$out")" <<'PYEOF' || fail=1
import re, sys
line = sys.argv[1]
m = re.search(r"loss ([0-9.]+) -> ([0-9.]+)", line)
ok = m is not None and abs(float(m.group(1)) - 11.16) < 0.2 and float(m.group(2)) < 0.75 * float(m.group(1))
print(("ok   " if ok else "FAIL ") + "llama-tiny V=70302 on the uint32 file (ln 70302 = 11.16 at the start): " + line.strip())
sys.exit(0 if ok else 1)
PYEOF
else bad "train llama-tiny V=70302"; echo "$out" | tail -5; fi
if s="$("$Z" sample "$T/l.ztw" --tokenizer "$T/big.json" --prompt "the licence" --tokens 16 --seed 1 2>&1)"; then
  ok "sample --tokenizer decodes the 70302-id vocabulary: $(tr '\n' ' ' <<<"$s" | cut -c1-80)"
else bad "sample: $s"; fi
sed 's/preset: llama-tiny, vocab_size: 70302/preset: tiny/' "$T/l.yaml" > "$T/g.yaml"
set +e; out="$("$Z" train "$T/g.yaml" 2>&1)"; rc=$?; set -e
msg="$(grep 'error' <<<"$out" || true)"
if [ "$rc" = 3 ] && grep -q "data.train $T/gpl.bin: token 7[0-9]* at position [0-9]* is outside the vocabulary (V=50257)" <<<"$msg"; then
  ok "GPT-2 tiny (V=50257) on it: exit 3: $msg"
else bad "V=50257 on the uint32 file: exit $rc: $msg"; fi
exit $fail

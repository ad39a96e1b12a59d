#!/usr/bin/env bash
# torch_oracle.sh BUILD SOURCE - zerotrain's GPT-2 loss and gradients against PyTorch (python3-torch)
# on the same parameters and batch: the real GPT-2 vocabulary, 2 layers, C=64, and again with the
# W1 layer shape (C=768, 12 heads) on 1 layer to cover the big-matrix paths.
set -euo pipefail
BUILD="$1"; SRC="$2"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
"$BUILD/tests/tool_oracle_dump" "$tmp/small.bin"
/usr/bin/python3 "$SRC/tests/torch_oracle.py" "$tmp/small.bin"
"$BUILD/tests/tool_oracle_dump" "$tmp/wide.bin" 1 768 12 50257 256 2 128
/usr/bin/python3 "$SRC/tests/torch_oracle.py" "$tmp/wide.bin"

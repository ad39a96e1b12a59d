#!/usr/bin/env bash
# demo.sh - the README's main job: installs what is missing, builds, prepares the real corpus (the
# King James Bible from Debian's bible-kjv-text, GPT-2 BPE tokens), trains a small GPT-2 and shows
# the loss falling on 2 local ranks (ZeRO-3: parameters, gradients and optimizer state sharded),
# then samples text from the trained weights.
#   scripts/demo.sh [--set key=value ...]    extra arguments go to `zerotrain train`
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup.sh"
bash "$ROOT/scripts/build.sh"
cd "$ROOT"
bash scripts/prepare_corpus.sh build/zerotrain
mkdir -p runs
build/zerotrain train examples/tiny.yaml --nproc 2 --set parallel.strategy=zero3 --save runs/tiny.ztw "$@"
echo "--- sample from the trained model ---"
build/zerotrain sample runs/tiny.ztw --prompt "And the LORD said unto Moses," --tokens 60 --seed 7

#!/usr/bin/env bash
# prepare_corpus.sh - the KJV Bible as a GPT-2 token corpus for examples and tests:
#   data/kjv.txt            the text (Debian bible-kjv + bible-kjv-text), one verse per line
#   data/kjv_train.bin      its tokens (llm.c format), all but the last 5%
#   data/kjv_val.bin        the last 5%
# Usage: scripts/prepare_corpus.sh [ZEROTRAIN_BINARY]   (default: build/zerotrain)
# Idempotent: kjv.txt is made only when absent; the token files are rewritten every time (in
# about a second, deterministically, each through a temporary file and rename).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${1:-$ROOT/build/zerotrain}
export ZT_SOURCE_DIR=${ZT_SOURCE_DIR:-$ROOT} # where zerotrain finds the GPT-2 vocabulary

die() {
    echo "prepare_corpus: $*" >&2
    exit 1
}

[ -x "$BIN" ] || die "no zerotrain binary at $BIN: build first (cmake -S . -B build && cmake --build build) or pass its path"
mkdir -p "$ROOT/data"
KJV=$ROOT/data/kjv.txt
if [ ! -s "$KJV" ]; then
    command -v bible >/dev/null || die "the 'bible' program is missing: run scripts/setup.sh (apt bible-kjv bible-kjv-text)"
    # "Gen1:1 In the beginning ..." -> "In the beginning ..."
    bible -f "Gen1:1-Rev22:21" </dev/null | sed 's/^[^ ]* //' >"$KJV.tmp.$$"
    [ -s "$KJV.tmp.$$" ] || { rm -f "$KJV.tmp.$$"; die "bible produced no text"; }
    mv "$KJV.tmp.$$" "$KJV"
    echo "prepare_corpus: wrote $KJV ($(wc -c <"$KJV") bytes)"
fi
"$BIN" tokenize "$KJV" -o "$ROOT/data/kjv_train.bin" --val-fraction 0.05 --val-out "$ROOT/data/kjv_val.bin"

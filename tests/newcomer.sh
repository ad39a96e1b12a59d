#!/usr/bin/env bash
# newcomer.sh BUILD SOURCE - what a newcomer meets first holds: README.md opens with the two
# commands (scripts/demo.sh, scripts/test.sh) and both scripts exist; no Markdown link in README.md,
# docs/ or bench/ points outside the repository or to a file that is not there; docs/design.md
# exists; `zerotrain --help` lists every subcommand that has a src/cli/cmd_*.c and each
# `zerotrain NAME --help` exits 0 and opens with its one-line summary.
set -uo pipefail
BUILD="$1"
SRC="$2"
ZT="$BUILD/zerotrain"
fail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fail=1; }

# 1. the two commands come first: the first code block of README.md is exactly them
first_block="$(awk '/^```/{n++; next} n==1' "$SRC/README.md" | sed 's/ *#.*//' | grep -v '^$')"
if [ "$first_block" = "$(printf 'bash scripts/demo.sh\nbash scripts/test.sh')" ]; then ok "README opens with the two commands"
else bad "README's first code block is not the two commands: $first_block"; fi
for s in demo.sh test.sh; do [ -f "$SRC/scripts/$s" ] || bad "scripts/$s is missing"; done
[ -s "$SRC/docs/design.md" ] && ok "docs/design.md exists" || bad "docs/design.md is missing"
grep -q 'bash scripts/test.sh' "$SRC/.ci/run" && ok ".ci/run runs README's test command" || bad ".ci/run does not run scripts/test.sh"

# 2. every link stays inside the repository and points to something
root="$(cd "$SRC" && pwd -P)"
for md in "$SRC"/README.md "$SRC"/docs/*.md "$SRC"/bench/*.md; do
  dir="$(dirname "$md")"
  while IFS= read -r target; do
    t="${target%%#*}"
    [ -z "$t" ] && continue
    case "$t" in
      http://*|https://*|mailto:*) bad "$(basename "$md"): link leaves the repository: $target"; continue ;;
    esac
    p="$(cd "$dir" && realpath -m "$t")"
    case "$p" in
      "$root"/*) [ -e "$p" ] || bad "$(basename "$md"): link to a missing file: $target" ;;
      *) bad "$(basename "$md"): link outside the repository: $target" ;;
    esac
  done < <(grep -o '\](\([^)]*\))' "$md" | sed 's/^](//; s/)$//')
done
[ $fail = 0 ] && ok "every Markdown link in README.md, docs/ and bench/ resolves inside the repository"

# 3. --help lists every subcommand, and each has its own --help
help="$("$ZT" --help)" || bad "zerotrain --help exits $?"
for f in "$SRC"/src/cli/cmd_*.c; do
  name="$(basename "$f" .c)"; name="${name#cmd_}"
  [ "$name" = estimate ] && name=estimate-memory
  name="${name//_/-}" # cmd_chat_template.c: chat-template
  if grep -q "^  $name " <<<"$help"; then
    out="$("$ZT" "$name" --help 2>&1)"; rc=$?; first="$(head -1 <<<"$out")" # all of it: head -1 on a pipe
    # would end a help longer than stdio's 4 KiB buffer with SIGPIPE (exit 141)
    if [ "$rc" = 0 ] && [[ "$first" == "zerotrain $name: "* ]]; then ok "$name: listed; --help: $first"
    else bad "$name --help: exit $rc, first line: $first"; fi
  else bad "zerotrain --help does not list $name"; fi
done
exit $fail

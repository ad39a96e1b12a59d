#!/usr/bin/env bash
# config_real.sh BUILD SOURCE - the real-world corpus (tests/configs/real/, sources in SOURCES.md:
# DeepSpeed JSONs and Accelerate YAMLs from public projects, unchanged) through
# `zerotrain config FILE --set data.train=...`:
#  - every file resolves (exit 0) or is refused with exit 2 and an error line that names the key
#    and the reason ("file:line:col: key: reason", or "key N is not supported: reason"); any
#    other exit (a crash, a sanitizer abort) or a refusal without a key fails;
#  - the share that resolves is printed, with the refusals grouped by key; below 90% fails;
#  - each DeepSpeed file that resolves also resolves alone, without --set (`zerotrain config`
#    notes the missing data.train instead of refusing).
# An Accelerate file that names its DeepSpeed JSON (deepspeed_config_file) is run from a folder
# laid out as in its repository, so the relative path finds the corpus copy.
set -uo pipefail
BUILD="$1"
SRC="$2"
ZT="$(cd "$BUILD" && pwd)/zerotrain"
REAL="$(cd "$SRC" && pwd)/tests/configs/real"
export OMP_NUM_THREADS=1
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail=0
"$ZT" tokenize /usr/share/common-licenses/GPL-3 -o "$tmp/gpl.bin" >/dev/null || { echo "FAIL tokenize"; exit 1; }

# where each deepspeed_config_file points, as "yaml file|path it names|corpus file"
INCLUDES=(
  "accelerate.config_yaml_templates.deepspeed.yaml|../deepspeed_config_templates/zero_stage1_config.json|accelerate.deepspeed_config_templates.zero_stage1_config.json"
  "accelerate.alst_ulysses_sequence_parallelism.sp-alst.accelerate-config.yml|sp-alst.ds-config.json|accelerate.alst_ulysses_sequence_parallelism.sp-alst.ds-config.json"
)

n=0; resolved=0; refused=0
: > "$tmp/reasons"
for f in "$REAL"/*.json "$REAL"/*.yaml "$REAL"/*.yml; do
  [ -e "$f" ] || continue
  name="$(basename "$f")"
  run="$f"; cwd="$tmp"
  for inc in "${INCLUDES[@]}"; do
    IFS='|' read -r yaml named target <<< "$inc"
    [ "$yaml" = "$name" ] || continue
    cwd="$tmp/inc/$n/work"
    mkdir -p "$cwd" "$(dirname "$cwd/$named")"
    cp "$f" "$cwd/$name"
    cp "$REAL/$target" "$cwd/$named"
    run="$cwd/$name"
  done
  n=$((n + 1))
  (cd "$cwd" && "$ZT" config "$run" --set "data.train=$tmp/gpl.bin" --set data.val= > "$tmp/out" 2> "$tmp/err")
  rc=$?
  if [ $rc = 0 ]; then
    resolved=$((resolved + 1))
    # a DeepSpeed file alone (no --set) resolves too: a missing data.train is only a note
    case "$name" in *.json)
      if ! (cd "$cwd" && "$ZT" config "$run" > /dev/null 2> "$tmp/err2"); then
        echo "FAIL $name resolves with data.train set but not alone: $(head -c 300 "$tmp/err2")"; fail=1
      fi;;
    esac
  elif [ $rc = 2 ]; then
    # the first problem: "file:l:c: key: reason" or "... key VALUE is not supported: reason"
    line="$(grep -m1 -E '^(zerotrain: error|  )' "$tmp/err" | sed 's/^zerotrain: error (usage): //; s/^  //')"
    if [[ "$line" =~ 2\ problems|[0-9]+\ problems ]]; then line="$(sed -n 2p "$tmp/err" | sed 's/^  //')"; fi
    key="$(printf '%s\n' "$line" | grep -oE '(^|: )[a-z_][a-zA-Z0-9_.]*(\[[0-9]+\])?: [^ ]|[a-z_]+\.[a-z_.]+ [^ ]+ (is|are) not [^:]*: ' | head -1 | sed -E 's/^: //; s/: .$//; s/ .*//')"
    if [ -z "$key" ]; then
      echo "FAIL $name: refused without naming a key: $line"; fail=1
    else
      refused=$((refused + 1))
      reason="$(printf '%s\n' "$line" | sed -E "s/.*${key//./\\.}[^:]*: //" | cut -c1-90)"
      echo "$key|$reason|$name" >> "$tmp/reasons"
    fi
  else
    echo "FAIL $name: exit $rc (a crash?)"; sed 's/^/     /' "$tmp/err" | head -5; fail=1
  fi
done
[ $n -ge 60 ] || { echo "FAIL only $n files in tests/configs/real (>= 60 expected)"; fail=1; }
echo "refused ($refused), by key:"
sort "$tmp/reasons" | awk -F'|' '{print "  " $1 ": " $2 "  [" $3 "]"}'
pct=$((resolved * 1000 / (n > 0 ? n : 1)))
echo "resolved $resolved of $n files ($((pct / 10)).$((pct % 10))%), refused with a key and reason: $refused"
if [ $pct -lt 900 ]; then echo "FAIL the resolve rate is below 90%"; fail=1; fi
[ $fail = 0 ] && echo "ok   config_real" || echo "FAIL config_real"
exit $fail

# C18: a commit whose manifest names a format version this build does not know, or the wrong
# format (the manifest's magic; the shard files carry no header of their own, the manifest's
# checksum covers them): resuming that commit exits 4 with "format vN not supported (max vM)" or the
# bad magic named, before any tensor is read; resuming the directory skips it -> NL from step 4.
# The edited manifests are re-sealed (manifest.json.xxh64 recomputed) so the version check is reached.
source "$(dirname "$0")/lib.bash"
command -v xxhsum > /dev/null || { echo "xxhsum missing (Debian package xxhash, scripts/setup.sh)"; exit 1; }
fresh_reference
run_job A --stop-after 6 --ckpt-dir "$T/ck" --ckpt-every 2
[ $RC = 0 ] || bad "the run to edit: exit $RC"
C="$T/ck/step-00000006"
cp "$C/manifest.json" "$T/manifest.orig"
reseal() { xxhsum -H64 "$C/manifest.json" | cut -d' ' -f1 > "$C/manifest.json.xxh64"; }
edited() { # LABEL SED WANT: step-6's manifest edited by SED and re-sealed; resuming it: exit 4, WANT
  sed "$2" "$T/manifest.orig" > "$C/manifest.json"; reseal
  run_job "$1" --resume "$C"
  expect_rc 4 "$1" "$1"
  grep -q "$3" "$T/$1.err" && ok "$1: $(grep -o 'error.*' "$T/$1.err" | head -1 | cut -c1-220)" || bad "$1: no '$3' in: $(tail -2 "$T/$1.err")"
  grep -q '"step":' "$T/$1.jsonl" 2>/dev/null && bad "$1: it trained a step"
}
edited version3 's/"version":[[:space:]]*1,/"version": 3,/' "format v3 not supported (max v2)"
edited magic 's/"zerotrain-checkpoint"/"zerotrain-chekpoint"/' 'bad magic: format "zerotrain-chekpoint"'
"$Z" verify "$C" > "$T/verify.out" 2>&1; RC=$?
expect_rc 4 "verify" verify
grep -q 'bad magic' "$T/verify.out" && ok "verify names it too" || bad "verify: $(cat "$T/verify.out")"
# the directory: step-6 is not a commit this build can read; resumed from step 4 -> NL
edited version9 's/"version":[[:space:]]*1,/"version": 9,/' "format v9 not supported (max v2)"
NL_FROM=4 nl_check A "$T/ck"
grep -q "latest names step-00000006, which is not an intact commit; using step-00000004" "$T/A-resume.out" &&
  ok "said: $(grep -o 'checkpoint: warning.*' "$T/A-resume.out" | head -1 | cut -c1-200)" || bad "nothing said: $(grep checkpoint: "$T/A-resume.out")"
finish

# X02: hostile checkpoint manifests (re-sealed with xxhsum so the parser sees them): a `../` or
# absolute file name, negative, fractional, huge and overflowing offsets, sizes and row counts,
# huge counts, a `latest` that points out of the directory. Each resume of the commit exits 4
# naming the manifest, before a step; nothing outside the commit is read. The parser's fuzz
# harness is tests/fuzz/fuzz_ckpt_manifest.c (tests/fuzz/README.md).
STRATEGY=zero3 # two shard files
source "$(dirname "$0")/lib.bash"
command -v xxhsum > /dev/null || { echo "xxhsum missing (Debian package xxhash, scripts/setup.sh)"; exit 1; }
fresh_reference
run_job A --stop-after 4 --ckpt-dir "$T/ck" --ckpt-every 2
[ $RC = 0 ] || bad "the run to edit: exit $RC"
C="$T/ck/step-00000004"
cp "$C/manifest.json" "$T/manifest.orig"
hostile() { # LABEL PYTHON-EDIT-OF-m WANT: step-4's manifest edited, re-sealed, resumed: exit 4, WANT
  /usr/bin/python3 - "$T/manifest.orig" "$C/manifest.json" "$2" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
exec(sys.argv[3])
open(sys.argv[2], 'w').write(json.dumps(m))
PY
  xxhsum -H64 "$C/manifest.json" | cut -d' ' -f1 > "$C/manifest.json.xxh64"
  run_job "$1" --resume "$C"
  expect_rc 4 "$1" "$1"
  grep -q -- "$3" "$T/$1.err" && ok "$1: $(grep -o 'error.*' "$T/$1.err" | head -1 | sed "s|$T/||g" | cut -c1-160)" || bad "$1: no '$3' in: $(tail -2 "$T/$1.err")"
  grep -q '"step":' "$T/$1.jsonl" 2>/dev/null && bad "$1: it trained a step"
}
echo secret > "$T/ck/outside.bin"
hostile dotdot "m['files'][0]['name'] = '../outside.bin'" "file entry 0 is malformed"
hostile absolute "m['files'][1]['name'] = '$T/ck/outside.bin'" "file entry 1 is malformed"
hostile dot "m['files'][0]['name'] = '..'" "file entry 0 is malformed"
hostile bytes_neg "m['files'][0]['bytes'] = -7" "file entry 0 is malformed"
hostile bytes_huge "m['files'][0]['bytes'] = 1e300" "file entry 0 is malformed"
hostile offset_neg "m['tensors'][0]['slices'][0]['offset'] = -4096" "a slice of wte.weight is malformed"
hostile offset_huge "m['tensors'][0]['slices'][0]['offset'] = 18446744073709551615" "a slice of wte.weight is malformed"
hostile offset_frac "m['tensors'][0]['slices'][0]['offset'] = 0.5" "a slice of wte.weight is malformed"
hostile rows_overflow "m['tensors'][0]['slices'][0]['rows'] = 2**50" "lies past the end of file"
hostile row0_huge "m['tensors'][0]['slices'][0]['row0'] = 2**62" "a slice of wte.weight is malformed"
hostile file_index "m['tensors'][0]['slices'][0]['file'] = 2**31" "a slice of wte.weight is malformed"
hostile tensors_many "m['tensors'] = m['tensors'] * 1000" "does not match the checkpoint (28000)"
hostile files_none "m['files'] = []" "world, files or tensors missing or malformed"
hostile step_huge "m['step'] = 1e300" "world, files or tensors missing or malformed"
hostile world_zero "m['world'] = 0" "world, files or tensors missing or malformed"
# `latest` pointing out of the directory: not followed (only a step-N name is); the intact step-4
cp "$T/manifest.orig" "$C/manifest.json"; xxhsum -H64 "$C/manifest.json" | cut -d' ' -f1 > "$C/manifest.json.xxh64"
mkdir -p "$T/evil"; cp -r "$C" "$T/evil/step-00000099"; echo "../evil/step-00000099" > "$T/ck/latest"
NL_FROM=4 nl_check A "$T/ck"
grep -q "step-00000099" "$T/A-resume.out" && ! grep -q "resum.*evil" "$T/A-resume.out" && ok "latest '../evil/...' not followed: $(grep -o 'checkpoint: warning.*latest.*' "$T/A-resume.out" | sed "s|$T/||g" | cut -c1-160)" || bad "latest: $(grep checkpoint "$T/A-resume.out")"
finish

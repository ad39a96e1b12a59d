# X03: a token file with a corrupted header (magic, version, token count; a header cut short): the
# job exits 3 on both ranks' behalf with the reason, before any step. The header parser's fuzz
# harness is tests/fuzz/fuzz_token_file.c (tests/fuzz/README.md: how to build and run it).
source "$(dirname "$0")/lib.bash"
corrupt() { # LABEL INT_INDEX VALUE WANT: train.bin with header int INDEX set to VALUE; exit 3, WANT
  /usr/bin/python3 - "$T/train.bin" "$T/$1.bin" "$2" "$3" <<'PY'
import struct, sys
src, dst, i, v = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
b = bytearray(open(src, 'rb').read())
if i >= 0: struct.pack_into('<i', b, 4 * i, v)
else: b = b[:v]  # cut the file to v bytes
open(dst, 'wb').write(b)
PY
  run_job "$1" --set data.train="$T/$1.bin"
  expect_rc 3 "$1" "$1"
  grep -q -- "$4" "$T/$1.err" && ok "$1: $(grep -o 'error.*' "$T/$1.err" | head -1 | cut -c1-200)" || bad "$1: no '$4' in: $(tail -2 "$T/$1.err")"
  grep -q '"step":' "$T/$1.jsonl" 2>/dev/null && bad "$1: it trained a step"
}
corrupt magic 0 20240521 "bad magic 20240521 (expected 20240520 for uint16 tokens or 20240801 for uint32)"
corrupt version 1 7 "magic 20240520 with version 7; this build reads magic 20240520 version 1 (uint16 tokens) and magic 20240801 version 7 (uint32)"
corrupt count 2 999999999 "header says 999999999 tokens"
corrupt negative 2 -5 "header says -5 tokens"
corrupt short -1 600 "600 bytes, shorter than the 1024-byte header"
run_job intact
expect_rc 0 "the intact file" intact
finish

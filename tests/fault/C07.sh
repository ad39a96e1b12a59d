# C07: one flipped byte in the middle of the newest commit's shard: exit 4 naming the file and the
# checksum mismatch without fallback; with it, step-4 -> NL.
STRATEGY=zero3 # sharded: both ranks write a file
source "$(dirname "$0")/lib.bash"
fresh_reference
flip() { local f="$C/rank-00000.bin" s; s=$(stat -c %s "$f"); printf '\xff' | dd of="$f" bs=1 seek=$((s / 2)) conv=notrunc status=none; }
damaged_newest "rank-00000.bin: checksum mismatch" flip
finish

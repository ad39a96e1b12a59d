# C09: a shard of the newest commit missing: exit 4 naming the missing file without fallback; with
# it, step-4 -> NL.
STRATEGY=zero3 # sharded: both ranks write a file
source "$(dirname "$0")/lib.bash"
fresh_reference
damaged_newest "rank-00001.bin" eval 'rm "$C/rank-00001.bin"'
finish

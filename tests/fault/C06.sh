# C06: the newest commit's shard truncated: refused before any tensor is used (exit 4 naming the
# file and the sizes without checkpoint.fallback); by default resume falls back to the newest
# intact commit, naming what it skipped -> NL.
STRATEGY=zero3 # sharded: both ranks write a file
source "$(dirname "$0")/lib.bash"
fresh_reference
damaged_newest "rank-00001.bin: [0-9]* bytes, the manifest expects" eval 'truncate -s -100 "$C/rank-00001.bin"'
finish

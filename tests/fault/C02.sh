# C02: rank 0 killed after every shard of step 6 is written, before the manifest: as C01.
STRATEGY=zero3
source "$(dirname "$0")/lib.bash"
fresh_reference
killed_save sigkill:rank=0:step=6:at=save_manifest 4
finish

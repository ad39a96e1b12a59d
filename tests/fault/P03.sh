# P03: rank 1 exits with code 1 (not one of zerotrain's codes) in step 5: the job exits 5 naming
# rank 1 and its code; resume -> NL. A rank that fails with one of zerotrain's own codes (it said
# why) gives the job that code: a data error on rank 1 only stays exit 3.
source "$(dirname "$0")/lib.bash"
fresh_reference
lost_peer A exit:code=1:rank=1:step=5 "rank 1 exited with code 1"
ZT_FAULT=exit:code=3:rank=1:step=2 run_job B
expect_rc 3 "a rank exiting with zerotrain's code 3" B
finish

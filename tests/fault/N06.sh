# N06: MPI's own reduction algorithms play no part: with Open MPI's tuned all-reduce forced to
# each of algorithms 1, 3, 4, 6 the run is byte-identical to R (zerotrain sums floats itself, in a
# fixed order; MPI only moves bytes).
STRATEGY=zero3
source "$(dirname "$0")/lib.bash"
fresh_reference
for a in 1 3 4 6; do
  OMPI_MCA_coll_tuned_use_dynamic_rules=1 OMPI_MCA_coll_tuned_allreduce_algorithm=$a run_job M$a
  [ "$(losses 1 99 "$T/R.jsonl")" = "$(losses 1 99 "$T/M$a.jsonl")" ] && [ "$(hash_of "$T/M$a.out")" = "$(hash_of "$T/R.out")" ] &&
    ok "allreduce algorithm $a: identical to R" || bad "allreduce algorithm $a differs"
done
finish

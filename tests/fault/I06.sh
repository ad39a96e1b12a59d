# I06: a build or library mismatch across ranks. The ranks compare a build fingerprint (zerotrain's
# version and git commit, the compiler, the OpenBLAS, oneDNN and MPI libraries) before anything
# else; MPMD gives rank 1 a faked one (ZT_FAKE_BUILD_ID, the test hook): exit 9 before any step,
# listing the differing fields with both ranks' values; the same MPMD job without the fake runs.
# Where the kernels run avx2 already (the CPU's best, or ZT_ISA=avx2 for the whole suite) the
# ZT_ISA=avx2 case is the same build and is skipped.
source "$(dirname "$0")/lib.bash"
mpmd() { # NAME RANK1-ENV...: rank 0 plain, rank 1 with the given -x VAR=VALUE, under the hard timeout
  local name="$1"; shift
  local args=(train "$T/c.yaml" --set training.steps=2 --set logging.jsonl="$T/$name.jsonl")
  timeout -k 5 "$HARD_TIMEOUT" mpirun --oversubscribe -np 1 "$Z" "${args[@]}" : -np 1 "$@" "$Z" "${args[@]}" \
    > "$T/$name.out" 2> "$T/$name.err"
  RC=$?
  if [ $RC = 124 ] || [ $RC = 137 ]; then bad "$name hung past ${HARD_TIMEOUT} s"; fi
}
"$Z" version | sed "s/^/ok   $ROW: this build: /"
mpmd A -x ZT_FAKE_BUILD_ID=other
expect_rc 9 "rank 1 with another commit" A
commit="$("$Z" version | sed -n 's/^ *commit *//p')"
grep -q "error (mismatch): the ranks run different builds (1 field differs): rank 1 commit \"other\" vs rank 0 \"$commit\"" "$T/A.err" &&
  ok "$(grep -o 'error (mismatch).*' "$T/A.err" | head -1)" || bad "message: $(grep error "$T/A.err" | head -2)"
grep -q '"step":' "$T/A.jsonl" 2>/dev/null && bad "a step ran" || ok "no step ran"
mpmd B -x ZT_FAKE_BUILD_ID=openblas=OpenBLAS_0.3.99
expect_rc 9 "rank 1 with another OpenBLAS" B
grep -q "rank 1 openblas \"OpenBLAS_0.3.99\" vs rank 0 \"OpenBLAS 0\.[0-9.]* " "$T/B.err" &&
  ok "$(grep -o 'error (mismatch).*' "$T/B.err" | head -1 | cut -c1-200)" || bad "message: $(grep error "$T/B.err" | head -2)"
# hosts whose CPUs run different code paths (here: rank 1 held to the avx2 kernels by ZT_ISA, as a
# Zen 3 host beside a Zen 4 one would be) give other bits: refused by name, before any step
level="$("$Z" version | sed -n 's/^ *isa *//p' | cut -d';' -f1)"
if [ "$level" != avx2 ]; then
  mpmd D -x ZT_ISA=avx2
  expect_rc 9 "rank 1 on the avx2 kernels, rank 0 on $level" D
  grep -q "rank 1 isa \"avx2; gemm .*ZT_ISA set to a level every host has" "$T/D.err" &&
    ok "$(grep -o 'rank 1 isa.*' "$T/D.err" | head -1 | cut -c1-160)" || bad "message: $(grep error "$T/D.err" | head -2)"
else
  ok "the ranks run the avx2 kernels (the CPU's best, or ZT_ISA): no second code path to mismatch here"
fi
mpmd C -x ZT_FAKE_BUILD_ID=
expect_rc 0 "the same build on both ranks" C
finish

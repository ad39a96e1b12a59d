# exit2.bash - sourced by the multi-rank scripts (tests/tp.sh, tests/pp.sh): bad LABEL TEXT ARGS...
# runs `$Z ARGS...` and expects exit 2 (ZT_ERR_USAGE) with TEXT in its output; prints ok or FAIL
# and sets fail=1 on a miss. Needs $Z (the zerotrain binary) and fail.
bad() { # label "expected text" zerotrain-args...
  local label="$1" want="$2"; shift 2
  local out rc=0
  out="$("$Z" "$@" 2>&1)" || rc=$?
  if [ $rc -eq 2 ] && grep -qF -- "$want" <<<"$out"; then echo "ok   $label: exit 2: $want"
  else echo "FAIL $label: exit $rc, expected 2 and '$want':"; echo "$out" | tail -3; fail=1; fi
}

# dist_check.bash - sourced by the multi-rank scripts (strategies.sh, llama_strategies.sh, tp.sh,
# sp.sh): reads tool_dist_check's output and compares runs. check LABEL KEY OUTPUT: the first output
# of a KEY sets its reference hash and losses; every later one must equal them ("ok ..." or
# "FAIL ...", which sets fail=1). bad LABEL TEXT ARGS...: `$Z ARGS` exits 2 with TEXT in its
# message. mem LABEL N ARGS...: tool_memory_check ($MEMT) on N ranks finds every planned high-water
# exact. Not a test by itself (ctest runs tests/*.sh only).
hash_of() { grep '^hash' <<<"$1" | cut -d' ' -f2; }
losses_of() { grep '^losses' <<<"$1"; }
fail=0
bad() { # label "expected text" zerotrain-args...
  local label="$1" want="$2"; shift 2
  local out rc=0
  out="$("$Z" "$@" 2>&1)" || rc=$?
  if [ $rc -eq 2 ] && grep -qF -- "$want" <<<"$out"; then echo "ok   $label: exit 2: $want"
  else echo "FAIL $label: exit $rc, expected 2 and '$want':"; echo "$out" | tail -3; fail=1; fi
}
mem() { # label N args...
  local label="$1" n="$2"; shift 2
  local out rc=0
  out="$(mpirun -np "$n" --oversubscribe --bind-to none -x OMP_NUM_THREADS -x ZT_COMM_TIMEOUT "$MEMT" "$@" 2>&1)" || rc=$?
  local exact; exact="$(grep -o '^\([0-9]*\) of \1 (class, rank) high-waters exact' <<<"$out" || true)"
  if [ $rc -ne 0 ] || [ -z "$exact" ]; then echo "FAIL memory $label (rc $rc)"; echo "$out" | tail -4; fail=1
  else echo "ok   memory $label: $exact"; fi
}
declare -A ref_hash ref_loss
check() { # label key output
  local label="$1" key="$2" out="$3"
  local h; h="$(hash_of "$out")"
  if [ -z "$h" ]; then echo "FAIL $label: no result"; echo "$out" | tail -5; fail=1; return; fi
  if [ -z "${ref_hash[$key]:-}" ]; then ref_hash[$key]="$h"; ref_loss[$key]="$(losses_of "$out")"; fi
  if [ "$h" != "${ref_hash[$key]}" ] || [ "$(losses_of "$out")" != "${ref_loss[$key]}" ]; then
    echo "FAIL $label: hash $h, expected ${ref_hash[$key]} (or the losses differ)"; fail=1
  else
    echo "ok   $label: $h"
  fi
}

# dist_check.bash - sourced by the multi-rank scripts (strategies.sh, llama_strategies.sh): reads
# tool_dist_check's output and compares runs. check LABEL KEY OUTPUT: the first output of a KEY
# sets its reference hash and losses; every later one must equal them ("ok ..." or "FAIL ...",
# which sets fail=1). Not a test by itself (ctest runs tests/*.sh only).
hash_of() { grep '^hash' <<<"$1" | cut -d' ' -f2; }
losses_of() { grep '^losses' <<<"$1"; }
fail=0
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

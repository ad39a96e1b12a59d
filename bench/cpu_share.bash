# cpu_share.bash - sourced by the scale model's calibrations (bench/scale_calibrate.sh,
# bench/scale_tp.sh): `share N` prints the fraction of a core each of N busy processes gets over
# 2 s right now (on a shared machine other work takes the rest), capped at 1.
share() {
  local n=$1 pids=() i tot=0 t0 t1 ut st p
  t0=$(date +%s.%N)
  for ((i = 0; i < n; i++)); do (while :; do :; done) & pids+=($!); done
  sleep 2
  for p in "${pids[@]}"; do read -r ut st < <(cut -d' ' -f14,15 "/proc/$p/stat"); tot=$((tot + ut + st)); done
  t1=$(date +%s.%N)
  kill "${pids[@]}"; wait "${pids[@]}" 2>/dev/null || true
  python3 -c "import os; print(min(1.0, $tot / os.sysconf('SC_CLK_TCK') / ($t1 - $t0) / $n))"
}

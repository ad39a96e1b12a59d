# tool_serve.bash - sourced by the multi-rank scripts that run a test tool (tool_dist_check,
# tool_memory_check) many times: one MPI job per world size runs the invocations one after another
# (the tool's --serve DIR, tests/tool_common.h: each run makes its own world communicator, model
# and engine), instead of one mpirun each (mpirun and MPI's start-up were most of such a run's CPU).
# Not a test by itself (ctest runs tests/*.sh only).
#   serve_start NAME COMMAND...   starts `COMMAND --serve DIR` in the background (COMMAND: the
#                                 mpirun command line ending with the tool)
#   serve_run NAME ARGS...        prints what the tool printed for ARGS (every rank's stdout and
#                                 stderr, rank by rank) and returns its exit status; returns 99
#                                 without a server (not started, or ended: a run that fails where the
#                                 ranks may be in different collectives aborts the job), and the
#                                 caller then runs that invocation on its own, as before; also
#                                 when the environment's ZT_/OMP_/OMPI_/OPENBLAS_/MALLOC_ variables
#                                 differ from the server's (VAR=x run ...: the server has not got it)
#   serve_or_mpi NAME N TOOL ARGS...  serve_run, or (99) TOOL ARGS alone under mpirun -np N
#   serve_stop                    ends the servers (call it from the EXIT trap)
SERVE_DIR="$(mktemp -d)"
declare -A SERVE_PID SERVE_ENV
serve_env() { # the variables a run could read, as one string
  local v out=""
  for v in $(compgen -e); do
    case "$v" in ZT_*|OMP_*|OMPI_*|OPENBLAS_*|MALLOC_*|PMIX_*|HWLOC_*) out+="$v=${!v};";; esac
  done
  printf '%s' "$out"
}
mkfifo "$SERVE_DIR/nap"
exec {SERVE_NAP}<>"$SERVE_DIR/nap" # nothing is ever written: read -t on it is a sleep without a fork
serve_start() {
  local name="$1"; shift
  mkdir -p "$SERVE_DIR/$name"
  echo $$ > "$SERVE_DIR/$name/owner" # the server ends when this shell is gone, whatever happened
  "$@" --serve "$SERVE_DIR/$name" > "$SERVE_DIR/$name/log" 2>&1 &
  SERVE_PID[$name]=$!
  SERVE_ENV[$name]="$(serve_env)"
}
serve_run() {
  local name="$1" d="$SERVE_DIR/$1" pid="${SERVE_PID[$1]:-}"; shift
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 99
  [ "$(serve_env)" = "${SERVE_ENV[$name]}" ] || return 99
  printf '%s\0' "$@" > "$d/req.tmp" && mv "$d/req.tmp" "$d/req" # each argument ended by a NUL
  while [ ! -e "$d/resp" ]; do
    if ! kill -0 "$pid" 2>/dev/null; then rm -f "$d/req"; return 99; fi
    read -r -t 0.005 -u "$SERVE_NAP" _ || true
  done
  local lines
  mapfile -t lines < "$d/resp"
  rm -f "$d/resp"
  local n=${#lines[@]} st="${lines[-1]#@@status }"
  [ "$n" -gt 1 ] && printf '%s\n' "${lines[@]:0:n-1}"
  return "$st"
}
serve_or_mpi() {
  local name="$1" n="$2" tool="$3" rc=0; shift 3
  serve_run "$name" "$@" || rc=$?
  [ $rc = 99 ] || return $rc
  mpirun -np "$n" --oversubscribe --bind-to none -x OMP_NUM_THREADS -x ZT_COMM_TIMEOUT "$tool" "$@" 2>&1
}
serve_stop() {
  local name
  for name in "${!SERVE_PID[@]}"; do
    kill -0 "${SERVE_PID[$name]}" 2>/dev/null && printf '@@quit\0' > "$SERVE_DIR/$name/req"
  done
  for name in "${!SERVE_PID[@]}"; do
    for _ in $(seq 1 500); do kill -0 "${SERVE_PID[$name]}" 2>/dev/null || break; read -r -t 0.01 -u "$SERVE_NAP" _ || true; done
    kill "${SERVE_PID[$name]}" 2>/dev/null || true
    wait "${SERVE_PID[$name]}" 2>/dev/null || true
  done
  exec {SERVE_NAP}>&-
  rm -rf "$SERVE_DIR"
}

# lib.bash - the fault-matrix harness (sourced by tests/fault/<ROW>.sh; rows of
# ../shared/reference/reliability.md §4, docs/reliability.md): a tiny GPT-2 on 2 ranks, a reference
# run R, and the "nothing lost" check (NL) after a fault and a resume.
#   fresh_reference         R: STEPS steps straight (R.jsonl, R.out), shared by the rows that make
#                           the same run (R_OWN=1: made by this row)
#   run_job NAME ARGS...    zerotrain train c.yaml --nproc 2 ... under a hard timeout; $NAME.out/.err,
#                           $NAME.jsonl, exit code in RC (124: it hung = failure)
#   nl_check NAME CKDIR     resume from CKDIR's last commit: it verifies; resumed run's losses after
#                           the commit + the interrupted run's up to it = R's, every step once, bit for
#                           bit; the data cursor = commit step x samples per step; same final params
#                           (NL_FROM: the commit it must use; NL_UNLOGGED=S: step S's log line is
#                           absent, the run was killed while saving step S)
set -uo pipefail
BUILD="$1"; SRC="$2"
Z="$BUILD/zerotrain"
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ZT_COMM_TIMEOUT=60
unset ZT_FAULT
T="$(mktemp -d)"; trap 'rm -rf "$T"' EXIT
ROW="$(basename "$0" .sh)"
STEPS=${STEPS:-8}   # the run's length; STRATEGY (ddp) its strategy
SAMPLES_PER_STEP=4 # 2 ranks x micro-batch 2
HARD_TIMEOUT=${HARD_TIMEOUT:-90}
fail=0
ok() { echo "ok   $ROW: $*"; }
bad() { echo "FAIL $ROW: $*"; fail=1; }
finish() { exit $fail; }
source "$(dirname "${BASH_SOURCE[0]}")/../tiny_vocab.bash"
"$Z" tokenize /usr/share/common-licenses/GPL-3 -o "$T/train.bin" --val-fraction 0.1 --val-out "$T/val.bin" >/dev/null
fold_tokens "$T/train.bin" "$T/val.bin"
cat > "$T/c.yaml" <<YAML
model: {preset: tiny, n_layer: 2, n_embd: 32, n_head: 2, max_seq_len: 32, vocab_size: $TINY_VOCAB}
data: {train: $T/train.bin}
training: {micro_batch_size: 2, seq_len: 16, steps: $STEPS, warmup_steps: 1, lr: 3e-3}
logging: {print_every: 100}
parallel: {strategy: ${STRATEGY:-ddp}}
YAML
hash_of() { grep -o 'params xxh64 [0-9a-f]*' "$1" | cut -d' ' -f3; }
# step:loss_hex per line, for the steps in [lo, hi] of the given jsonl files
losses() { /usr/bin/python3 - "$@" <<'PY'
import json, sys
lo, hi = int(sys.argv[1]), int(sys.argv[2])
for f in sys.argv[3:]:
    for l in open(f):
        r = json.loads(l)
        if 'event' not in r and lo <= r['step'] <= hi: print(f"{r['step']}:{r['loss_hex']}")
PY
}
start_job() { # NAME ARGS...: the job in the background under the hard timeout; JOB = timeout's pid
  local name="$1"; shift
  timeout -k 5 "$HARD_TIMEOUT" "$Z" train "$T/c.yaml" --nproc 2 --set logging.jsonl="$T/$name.jsonl" "$@" \
    > "$T/$name.out" 2> "$T/$name.err" &
  JOB=$!
}
wait_job() { # NAME: RC = the job's exit code (124/137: it hung = a failure)
  wait "$JOB"; RC=$?
  if [ $RC = 124 ] || [ $RC = 137 ]; then bad "$1 hung past ${HARD_TIMEOUT} s"; fi
  return 0
}
run_job() { start_job "$@"; wait_job "$1"; }
launcher_of() { pgrep -P "$JOB" -f zerotrain | head -1; } # the launcher, child of timeout
wait_step() { # NAME S: until the job's log has step S (at most 20 s)
  for _ in $(seq 200); do grep -q "\"step\":$2," "$T/$1.jsonl" 2>/dev/null && return 0; sleep 0.1; done
  bad "$1 never reached step $2"
}
fresh_reference() { # R; the rows that run the same binary on the same config, data and arguments
  # share one R (the same uninterrupted, deterministic run) through $BUILD/tests/fault-ref/KEY, its
  # files with this row's directory in place of the one that made it; R_OWN=1: this row's own
  # (P07 reads R's output for timing)
  local key d f tmp
  key="$( { cat "$Z"; sed "s|$T|@T@|g" "$T/c.yaml"; cat "$T/train.bin" "$T/val.bin"; printf '%s\n' "$@"; env | grep -E '^(ZT_|OMP|PMIX_|HWLOC_)' | sort; } | xxhsum - | cut -d' ' -f1)"
  d="$BUILD/tests/fault-ref/$key"
  if [ -z "${R_OWN:-}" ] && [ -n "$key" ] && [ -f "$d/done" ]; then
    for f in R.out R.err R.jsonl; do sed "s|@T@|$T|g" "$d/$f" > "$T/$f"; done
    RC="$(cat "$d/rc")"
  else
    run_job R "$@"
    if [ -z "${R_OWN:-}" ] && [ -n "$key" ] && mkdir -p "$BUILD/tests/fault-ref" && tmp="$(mktemp -d "$BUILD/tests/fault-ref/.tmp.XXXXXX")"; then
      for f in R.out R.err R.jsonl; do sed "s|$T|@T@|g" "$T/$f" > "$tmp/$f" 2>/dev/null || : > "$tmp/$f"; done
      echo "$RC" > "$tmp/rc"; touch "$tmp/done"
      mv -T "$tmp" "$d" 2>/dev/null || rm -rf "$tmp" # another row made it first: theirs stays
    fi
  fi
  [ $RC = 0 ] || bad "reference run: exit $RC"
}
last_commit() { sed -n 's/^step-0*\([0-9]*\)$/\1/p' "$1/latest" 2>/dev/null; }
nl_check() { # NAME CKDIR [ARGS...]: resume and compare with R
  local name="$1" ck="$2"; shift 2
  local c; c="${NL_FROM:-$(last_commit "$ck")}" # NL_FROM: the commit the resume must use
  if [ -z "$c" ]; then bad "$name: no commit in $ck"; return; fi
  if "$Z" verify "$ck/$(printf 'step-%08d' "$c")" > "$T/verify.out" 2>&1; then ok "$name: the commit it resumes (step $c) validates"
  else bad "$name: verify: $(cat "$T/verify.out")"; fi
  ls "$ck" | grep -q '\.tmp$' && ok "$name: a leftover *.tmp is present and must be ignored"
  run_job "$name-resume" --resume "$ck" "$@"
  [ $RC = 0 ] || { bad "$name: resume exit $RC: $(tail -2 "$T/$name-resume.err")"; return; }
  local want=$((c * SAMPLES_PER_STEP))
  grep -q "next global sample $want " "$T/$name-resume.out" && ok "$name: resumed at global sample $want (step $c x $SAMPLES_PER_STEP), none skipped or repeated" ||
    bad "$name: data cursor: $(grep -o 'next global sample [0-9]*' "$T/$name-resume.out")"
  local got; got="$( { losses 1 "$c" "$T/$name.jsonl"; losses $((c + 1)) 999999 "$T/$name-resume.jsonl"; } | tr '\n' ' ')"
  local ref; ref="$(losses 1 999999 "$T/R.jsonl" | tr '\n' ' ')"
  if [ -n "${NL_UNLOGGED:-}" ]; then # a run killed while saving step NL_UNLOGGED never logged it
    ref="$(echo "$ref" | sed "s/\(^\| \)$NL_UNLOGGED:[^ ]* /\1/")"; ok "$name: step $NL_UNLOGGED's loss was never logged (killed while saving it): compared without it"
  fi
  [ -n "$ref" ] && [ "$got" = "$ref" ] && ok "$name: losses of steps 1..$STEPS equal R's bit for bit (each step once)" ||
    bad "$name: losses differ from R: got [$got] want [$ref]"
  [ -n "$(hash_of "$T/R.out")" ] && [ "$(hash_of "$T/$name-resume.out")" = "$(hash_of "$T/R.out")" ] &&
    ok "$name: final parameters equal R's ($(hash_of "$T/R.out"))" || bad "$name: params $(hash_of "$T/$name-resume.out") vs R $(hash_of "$T/R.out")"
}
expect_rc() { # WANT LABEL
  [ "$RC" = "$1" ] && ok "$2: exit $RC" || { bad "$2: exit $RC, want $1"; tail -5 "$T/$3.err" 2>/dev/null; }
}
no_orphans() { # NAME: no process of this test's jobs is left
  sleep 0.5
  if pgrep -f "$T/c.yaml" > /dev/null; then bad "$1: processes left behind: $(pgrep -af "$T/c.yaml" | head -3)"; pkill -KILL -f "$T/c.yaml"
  else ok "$1: no process left behind"; fi
}
lost_peer() { # NAME FAULT WANT_TEXT: a rank lost by ZT_FAULT mid-run: exit 5 naming it, promptly; NL
  local name="$1" fault="$2" want="$3"
  local t0; t0=$(date +%s.%N)
  ZT_FAULT="$fault" run_job "$name" --ckpt-dir "$T/ck-$name" --ckpt-every 2
  local took; took=$(echo "$(date +%s.%N) - $t0" | bc)
  expect_rc 5 "$fault" "$name"
  grep -q "$want" "$T/$name.err" && ok "$name: $(grep -o 'error (peer).*' "$T/$name.err")" || bad "$name: no '$want' in: $(tail -3 "$T/$name.err")"
  [ "$(echo "$took < 15" | bc)" = 1 ] && ok "$name: the job ended ${took%??????} s after it started (within T + 10 s)" || bad "$name: took $took s"
  no_orphans "$name"
  nl_check "$name" "$T/ck-$name"
}
damaged_newest() { # ROW-TEXT WANT_TEXT DAMAGE...: commits at steps 2, 4, 6 (then stopped), DAMAGE
  # run on step-6 ($C); without fallback: exit 4 naming WANT_TEXT; with it (the default): step-6
  # skipped and named, resumed from step-4 -> NL
  local want="$1"; shift
  run_job A --stop-after 6 --ckpt-dir "$T/ck" --ckpt-every 2
  [ $RC = 0 ] || bad "the run to damage: exit $RC"
  C="$T/ck/step-00000006"
  "$@"
  run_job strict --resume "$T/ck" --set checkpoint.fallback=false
  expect_rc 4 "checkpoint.fallback=false" strict
  grep -q "$want" "$T/strict.err" && ok "strict: $(grep -o 'error.*' "$T/strict.err" | head -1 | cut -c1-220)" || bad "strict: no '$want': $(tail -2 "$T/strict.err")"
  NL_FROM=4 nl_check A "$T/ck"
  grep -q "skipped $C: .*$want" "$T/A-resume.out" && grep -q "resuming from $T/ck/step-00000004, the newest intact commit" "$T/A-resume.out" &&
    ok "fallback: $(grep -o 'skipped .*step-00000006.*' "$T/A-resume.out" | head -1 | cut -c1-200)" || bad "fallback message: $(grep checkpoint: "$T/A-resume.out")"
}
killed_save() { # FAULT WANT_COMMIT: a save interrupted by FAULT at step 6 (commits every 2); the
  # job ends with exit 5; step-6 is invisible (no manifest-less step-6) and the resume uses
  # WANT_COMMIT -> NL
  local fault="$1" want="$2"
  ZT_FAULT="$fault" run_job A --ckpt-dir "$T/ck" --ckpt-every 2
  expect_rc 5 "$fault" A
  grep -q "error (peer).*died of SIGKILL" "$T/A.err" && ok "$(grep -o 'error (peer).*' "$T/A.err")" || bad "message: $(tail -2 "$T/A.err")"
  if [ -d "$T/ck/step-00000006" ] && [ ! -f "$T/ck/step-00000006/manifest.json" ]; then bad "step-6 visible without a manifest"; fi
  ls "$T/ck" | tr '\n' ' ' | sed "s/^/ok   $ROW: left in the checkpoint directory: /"; echo
  NL_FROM=$want nl_check A "$T/ck"
}

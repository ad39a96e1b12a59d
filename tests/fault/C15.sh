# C15: dtype narrowing on load. A checkpoint of fp32 master weights and moments (precision fp32)
# resumed by a run whose precision keeps none (bf16-low: bf16 parameters and moments) is refused
# with exit 4 before any step, naming the commit, both precisions, the dtypes and the tensors, and
# never "fallen back" from (the older commits are intact, not damaged); with --allow-cast (or
# checkpoint.allow_cast: true) it loads, said, every value rounded to the nearest bf16, and trains on.
# Widening (a bf16-low checkpoint into fp32) is accepted, said, and exact; bf16 mixed (fp32 master)
# loads an fp32 checkpoint with no cast at all.
source "$(dirname "$0")/lib.bash"
LOW=(--set precision.mode=bf16-low)
run_job A --stop-after 4 --ckpt-dir "$T/ck" --ckpt-every 2
[ $RC = 0 ] || bad "the fp32 run: exit $RC"
run_job narrow --resume "$T/ck" "${LOW[@]}"
expect_rc 4 "fp32 checkpoint into bf16-low" narrow
msg="$(grep -o 'error (checkpoint).*' "$T/narrow.err" | sort -u)"
[ "$(echo "$msg" | wc -l)" = 1 ] && ok "one error: ${msg:0:420}" || bad "not one error: $msg"
for w in "checkpoint $T/ck/step-00000004 holds precision fp32 values and this run's precision bf16-low" \
         "round 28 tensors (parameters fp32 -> bf16, optimizer moments exp_avg, exp_avg_sq fp32 -> bf16)" \
         "[wte.weight, wpe.weight, h.0.ln_1.weight" "14 more]" "--allow-cast" "checkpoint.allow_cast: true"; do
  grep -qF -- "$w" <<<"$msg" && ok "names '$w'" || bad "no '$w' in: $msg"
done
grep -q "skipped\|no intact commit" "$T/narrow.out" "$T/narrow.err" && bad "it fell back past an intact commit"
grep -q '"step":' "$T/narrow.jsonl" 2>/dev/null && bad "narrow: it trained a step"
# allowed: the flag, and the key; the loaded state re-saved (--stop-after 4) is fp32's rounded to bf16
run_job cast --resume "$T/ck" "${LOW[@]}" --allow-cast --stop-after 4 --ckpt-dir "$T/cast"
expect_rc 0 "--allow-cast" cast
grep -q "checkpoint: narrowing cast allowed (checkpoint.allow_cast / --allow-cast): $T/ck/step-00000004 holds precision fp32 values, this run keeps bf16-low ones: 28 tensors rounded to nearest" "$T/cast.out" &&
  ok "$(grep -o 'checkpoint: narrowing.*' "$T/cast.out" | cut -c1-200)" || bad "cast note: $(grep checkpoint "$T/cast.out")"
if /usr/bin/python3 - "$SRC/tests" "$T/ck/step-00000004" "$T/cast/step-00000004" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
import numpy as np
from ckpt_compare import load
_, a = load(sys.argv[2])
_, b = load(sys.argv[3])
def bf16(x):  # round to nearest even, as zerotrain's conversion (no subnormals here)
    u = x.view(np.uint32).astype(np.uint64)
    return (((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32)
bad = [k for k in a if bf16(a[k]).tobytes() != b[k].tobytes()]
changed = sum(int(np.count_nonzero(a[k] != b[k])) for k in a)
print(f"{len(a)} tensor kinds: each the fp32 one rounded to bf16 ({changed} values changed); differ: {bad[:3]}")
sys.exit(1 if bad or not changed else 0)
PY
then ok "the loaded state is the checkpoint's rounded to nearest bf16, every tensor and kind"; else bad "the cast state is not the rounded checkpoint"; fi
run_job castkey --resume "$T/ck" "${LOW[@]}" --set checkpoint.allow_cast=true
expect_rc 0 "checkpoint.allow_cast=true, trained to step $STEPS" castkey
# bf16 mixed keeps fp32 master weights: nothing to cast
run_job mixed --resume "$T/ck" --set precision.mode=bf16 --stop-after 5
expect_rc 0 "fp32 checkpoint into bf16 mixed" mixed
grep -q "narrowing\|widening" "$T/mixed.out" && bad "bf16 mixed: a cast was said" || ok "bf16 mixed: no cast"
# widening: a bf16-low checkpoint into fp32, exact
run_job L "${LOW[@]}" --stop-after 4 --ckpt-dir "$T/low"
run_job widen --resume "$T/low" --stop-after 4 --ckpt-dir "$T/wide"
expect_rc 0 "bf16-low checkpoint into fp32" widen
grep -q "checkpoint: widening: $T/low/step-00000004 holds precision bf16-low values (parameters bf16, moments bf16), loaded exactly into this run's fp32" "$T/widen.out" &&
  ok "$(grep -o 'checkpoint: widening.*' "$T/widen.out")" || bad "widening note: $(grep checkpoint "$T/widen.out")"
/usr/bin/python3 "$SRC/tests/ckpt_compare.py" "$T/low/step-00000004" "$T/wide/step-00000004" > "$T/cmp.out" &&
  ok "widened state re-saved: $(cat "$T/cmp.out")" || bad "widening changed values: $(cat "$T/cmp.out")"
finish

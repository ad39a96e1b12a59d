#!/usr/bin/env bash
# config_dialects.sh BUILD SOURCE - one configuration in three dialects, through the zerotrain
# command:
#  1. examples/native_zero3.yaml, ds_zero3.json, accelerate_deepspeed.yaml, accelerate_fsdp.yaml and
#     native_ds_include.yaml resolve (`zerotrain config ... --json`) to the same values and hash
#     (the dialect files name no data: --set gives it, as docs/config-train.md shows);
#  2. the two Accelerate files differ in exactly two lines, and a 2-rank, 5-step run of each (and of
#     the native and DeepSpeed files) ends with the same "params xxh64" line: bit-identical training;
#  3. `zerotrain config --print` reads back to the same values; `--docs` equals docs/config.md;
#  4. each class of bad input exits with code 2 and names file:line:column and key.
set -euo pipefail
BUILD="$1"
SRC="$2"
ZT="$BUILD/zerotrain"
EX="$SRC/examples"
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ZT_SOURCE_DIR="$SRC"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fail=1; }

# the values of `zerotrain config --json` as sorted "key=value" lines
values() {
  if command -v python3 >/dev/null; then
    python3 -c 'import json,sys; v=json.load(sys.stdin)["values"]; print("\n".join(f"{k}={json.dumps(v[k])}" for k in sorted(v)))'
  else
    jq -r '.values | to_entries | sort_by(.key) | .[] | "\(.key)=\(.value|tojson)"'
  fi
}

# data: the GPL, tokenized
"$ZT" tokenize /usr/share/common-licenses/GPL-3 -o "$tmp/gpl.bin" >/dev/null
DATA=(--set "data.train=$tmp/gpl.bin" --set data.val=)

# 1. the same configuration
"$ZT" config "$EX/native_zero3.yaml" --nproc 2 "${DATA[@]}" --json > "$tmp/ref.json"
values < "$tmp/ref.json" > "$tmp/ref.values"
for f in ds_zero3.json accelerate_deepspeed.yaml accelerate_fsdp.yaml native_ds_include.yaml; do
  if ! "$ZT" config "$EX/$f" --nproc 2 "${DATA[@]}" --json > "$tmp/$f.json" 2> "$tmp/$f.err"; then
    bad "$f does not resolve: $(cat "$tmp/$f.err")"; continue
  fi
  values < "$tmp/$f.json" > "$tmp/$f.values"
  if diff "$tmp/ref.values" "$tmp/$f.values" > "$tmp/$f.diff"; then
    ok "$f resolves to native_zero3.yaml's configuration ($(grep -c = "$tmp/$f.values") keys)"
  else
    bad "$f differs from native_zero3.yaml:"; cat "$tmp/$f.diff"
  fi
done
h_ref="$(grep '"hash"' "$tmp/ref.json")"
for f in ds_zero3.json accelerate_deepspeed.yaml accelerate_fsdp.yaml native_ds_include.yaml; do
  [ "$(grep '"hash"' "$tmp/$f.json" 2>/dev/null)" = "$h_ref" ] || bad "$f: config hash differs"
done
strategy="$(grep '^parallel.strategy=' "$tmp/ref.values")"
[ "$strategy" = 'parallel.strategy="zero3"' ] && ok "strategy: zero3" || bad "strategy: $strategy"

# 2. two lines apart, and bit-identical training
ndiff="$(diff "$EX/accelerate_deepspeed.yaml" "$EX/accelerate_fsdp.yaml" | grep -c '^[<>]' || true)"
changed="$(diff "$EX/accelerate_deepspeed.yaml" "$EX/accelerate_fsdp.yaml" | grep '^>' | cut -c3- | cut -d: -f1 | tr "\n" " " || true)"
if [ "$ndiff" = 4 ]; then ok "the Accelerate files differ in two lines: $changed"; else bad "the Accelerate files differ in $ndiff diff lines"; fi
RUN=(--set training.steps=5 --set training.seq_len=32 --set logging.print_every=5)
declare -A hash
for f in accelerate_deepspeed.yaml accelerate_fsdp.yaml native_zero3.yaml ds_zero3.json; do
  set +e
  out="$(timeout 300 "$ZT" train "$EX/$f" --nproc 2 "${DATA[@]}" "${RUN[@]}" 2>&1)"
  rc=$?
  set -e
  h="$(grep -o 'params xxh64 [0-9a-f]*' <<<"$out" | tail -1 || true)"
  if [ $rc -ne 0 ] || [ -z "$h" ]; then bad "train $f: rc $rc"; echo "$out" | tail -5; continue; fi
  grep -q 'parallel: strategy zero3 on 2 ranks' <<<"$out" || bad "train $f: not zero3 on 2 ranks: $(grep '^parallel' <<<"$out")"
  hash[$f]="$h"
  ok "train $f (2 ranks, 5 steps): $h"
done
if [ -n "${hash[accelerate_deepspeed.yaml]:-}" ] && [ "${hash[accelerate_deepspeed.yaml]}" = "${hash[accelerate_fsdp.yaml]:-x}" ] &&
   [ "${hash[accelerate_deepspeed.yaml]}" = "${hash[native_zero3.yaml]:-x}" ] && [ "${hash[accelerate_deepspeed.yaml]}" = "${hash[ds_zero3.json]:-x}" ]; then
  ok "DEEPSPEED and FSDP (and native, DeepSpeed JSON) train bit-identically"
else
  bad "the runs differ: ${hash[*]:-none}"
fi

# mixed_precision bf16 / fp16: Accelerate's FSDP plugin (reduce_dtype) and DeepSpeed's default
# communication_data_type both reduce gradients in that dtype, so the two files still resolve alike
for p in bf16 fp16; do
  for f in accelerate_deepspeed.yaml accelerate_fsdp.yaml; do
    sed "s/^mixed_precision:.*/mixed_precision: $p/" "$EX/$f" > "$tmp/$p-$f"
    "$ZT" config "$tmp/$p-$f" --nproc 2 "${DATA[@]}" --json | values > "$tmp/$p-$f.values"
  done
  printf '{"%s": {"enabled": true}, "zero_optimization": {"stage": 3}, "train_micro_batch_size_per_gpu": 4}\n' $p > "$tmp/$p-ds.json"
  "$ZT" config "$tmp/$p-ds.json" --nproc 2 "${DATA[@]}" --json | values > "$tmp/$p-ds.values"
  if grep -qx "precision.reduce_dtype=\"$p\"" "$tmp/$p-accelerate_fsdp.yaml.values" &&
     diff -q "$tmp/$p-accelerate_deepspeed.yaml.values" "$tmp/$p-accelerate_fsdp.yaml.values" >/dev/null &&
     grep -qx "precision.reduce_dtype=\"$p\"" "$tmp/$p-ds.values"; then
    ok "mixed_precision $p: DEEPSPEED and FSDP both resolve to precision.reduce_dtype $p, as does a DeepSpeed $p block"
  else
    bad "mixed_precision $p: reduce dtypes $(grep -h reduce_dtype "$tmp"/$p-*.values | tr '\n' ' ')"
  fi
done

# 3. --print reads back; the docs are current
for f in accelerate_fsdp.yaml ds_zero3.json native_zero3.yaml; do
  "$ZT" config "$EX/$f" --nproc 2 "${DATA[@]}" --print > "$tmp/printed.yaml"
  "$ZT" config "$tmp/printed.yaml" --json | values > "$tmp/printed.values"
  diff -q "$tmp/ref.values" "$tmp/printed.values" >/dev/null && ok "--print of $f reads back" || bad "--print of $f does not read back"
done
if "$ZT" config --docs | diff -q - "$SRC/docs/config.md" >/dev/null; then ok "docs/config.md is current"
else bad "docs/config.md is stale: $ZT config --docs > docs/config.md"; fi

# 4. bad input: exit code 2 and the message
expect() { # label want-substring cmd...
  local label="$1" want="$2"; shift 2
  set +e
  local out; out="$("$@" 2>&1 >/dev/null)"
  local rc=$?
  set -e
  if [ $rc -eq 2 ] && grep -qF -- "$want" <<<"$out"; then ok "$label: exit 2, $(grep -F -m1 -- "$want" <<<"$out" | cut -c1-150)"
  else bad "$label: rc $rc, wanted exit 2 and \"$want\""; echo "$out" | head -5; fi
}
printf '{\n  "zero_optimization": {"stage": 3, "stage3_max_live_parameter": 1e9},\n  "train_batch_size": 16,\n  "train_batch_size": 32\n}\n' > "$tmp/typo.json"
expect "unknown key" "typo.json:2:37: zero_optimization.stage3_max_live_parameter: unknown deepspeed key; did you mean zero_optimization.stage3_max_live_parameters?" "$ZT" config "$tmp/typo.json"
expect "duplicate key" "typo.json:4:3: train_batch_size: duplicate key (first at line 3)" "$ZT" config "$tmp/typo.json"
expect "all reported together" "2 problems in the configuration:" "$ZT" config "$tmp/typo.json"
printf 'distributed_type: FSDP\nnum_processes: two\nfsdp_config:\n  fsdp_sharding_strategy: 7\n' > "$tmp/acc.yaml"
expect "wrong type" "acc.yaml:2:16: num_processes: expected an integer, got a string \"two\"" "$ZT" config "$tmp/acc.yaml"
expect "out of range" "acc.yaml:4:27: fsdp_config.fsdp_sharding_strategy: expected FULL_SHARD" "$ZT" config "$tmp/acc.yaml"
printf '{"train_batch_size": 16, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2}\n' > "$tmp/batch.json"
expect "micro x GA x world != global" "micro x accumulation x world != global batch: 4 x 2 x 3 = 24, expected 16" \
  "$ZT" config "$tmp/batch.json" --nproc 3 "${DATA[@]}"
printf 'deepspeed_config: ds.json\nparallel: {strategy: zero2}\n' > "$tmp/run.yaml"
cp "$EX/ds_zero3.json" "$tmp/ds.json"
expect "native vs dialect contradiction" "ds.json:14:14: zero_optimization.stage: parallel.strategy zero3 contradicts zero2 from $tmp/run.yaml:2:22" \
  "$ZT" config "$tmp/run.yaml"
printf '{"bf16": {"enabled": true}, "communication_data_type": "fp16", "train_micro_batch_size_per_gpu": 4}\n' > "$tmp/bf16h.json"
expect "fp16 reduction without loss scaling (train, before any rank starts)" "bf16h.json:1:56: precision.reduce_dtype: fp16 needs precision.mode fp16" \
  "$ZT" train "$tmp/bf16h.json" "${DATA[@]}"
printf '{"fp16": {"enabled": true}, "communication_data_type": "bf16", "train_micro_batch_size_per_gpu": 4}\n' > "$tmp/fp16b.json"
expect "bf16 reduction of fp16 gradients" "fp16b.json:1:56: precision.reduce_dtype: bf16 with precision.mode fp16" \
  "$ZT" config "$tmp/fp16b.json" "${DATA[@]}"
expect "--set unknown key" "--set: training.stepz: unknown key; did you mean training.steps?" \
  "$ZT" config "$EX/native_zero3.yaml" --set training.stepz=3
# ranks that resolved different configurations stop with exit 9 naming them (MPMD: rank 1 gets
# another --set than rank 0)
set +e
out="$(OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 timeout 120 mpirun --oversubscribe \
  -np 1 "$ZT" train "$EX/native_zero3.yaml" "${DATA[@]}" --set training.steps=2 : \
  -np 1 "$ZT" train "$EX/native_zero3.yaml" "${DATA[@]}" --set training.steps=3 2>&1)"
rc=$?
set -e
if [ $rc -eq 9 ] && grep -q "rank(s) 1 differ from rank 0" <<<"$out"; then ok "different configs across ranks: exit 9, rank 1 named"
else bad "config mismatch across ranks: rc $rc"; echo "$out" | tail -5; fi
exit $fail

#!/usr/bin/env bash
# export_safetensors.sh BUILD SOURCE - trains a small GPT-2 on 2 ranks (zero3), exports the sharded
# checkpoint as Hugging Face GPT-2 safetensors, and checks in PyTorch (python3-torch, a small
# reader) that the exported weights give zerotrain's loss on a batch to 1e-5 relative (fp32); bf16
# export within bf16 rounding; and the import path (--init model.safetensors) reproduces the loss.
set -euo pipefail
BUILD="$1"; SRC="$2"; Z="$BUILD/zerotrain"
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
T="$(mktemp -d)"; trap 'rm -rf "$T"' EXIT
"$Z" tokenize /usr/share/common-licenses/GPL-3 -o "$T/d.bin" --val-fraction 0.1 --val-out "$T/v.bin" >/dev/null
cat > "$T/c.yaml" <<YAML
model: {preset: tiny, n_layer: 2, n_embd: 32, n_head: 4, max_seq_len: 32}
data: {train: $T/d.bin}
training: {micro_batch_size: 2, seq_len: 16, steps: 4, warmup_steps: 1, lr: 3e-3}
logging: {print_every: 100}
YAML
"$Z" train "$T/c.yaml" --nproc 2 --set parallel.strategy=zero3 --ckpt-dir "$T/ck" >/dev/null
"$Z" export "$T/ck" -o "$T/m.safetensors"
"$Z" export "$T/ck" -o "$T/m16.safetensors" --dtype bf16 >/dev/null
zt="$("$BUILD/tests/tool_score" "$T/ck" "$T/v.bin" 4 16)"
/usr/bin/python3 "$SRC/tests/safetensors_torch.py" "$T/m.safetensors" "$T/v.bin" 4 16 4 "$zt"
# bf16 weights: the loss moves by bf16 rounding only (relative 1e-2 is ~10x that effect here)
zt16="$("$BUILD/tests/tool_score" "$T/ck" "$T/v.bin" 4 16 "$T/m16.safetensors")"
/usr/bin/python3 -c "import sys; a,b=float(sys.argv[1]),float(sys.argv[2]); print(f'bf16 export: loss {b:.6f} vs fp32 {a:.6f}'); sys.exit(abs(a-b)/a > 1e-2)" "$zt" "$zt16"
# import: loading the fp32 export over the checkpoint gives the same loss exactly
zt2="$("$BUILD/tests/tool_score" "$T/ck" "$T/v.bin" 4 16 "$T/m.safetensors")"
[ "$zt" = "$zt2" ] && echo "import of the export: same loss $zt" || { echo "import changed the loss: $zt vs $zt2"; exit 1; }
# a .ztw weights file (train --save) exports too, to the same bytes as the checkpoint of the same run
"$Z" train "$T/c.yaml" --nproc 2 --set parallel.strategy=zero3 --save "$T/w.ztw" --ckpt-dir "$T/ck2" >/dev/null
"$Z" export "$T/w.ztw" -o "$T/w.safetensors" >/dev/null
"$Z" export "$T/ck2" -o "$T/c2.safetensors" >/dev/null
cmp "$T/w.safetensors" "$T/c2.safetensors" && echo "export of the .ztw = export of the checkpoint, byte for byte" ||
  { echo "export of the .ztw differs from the checkpoint's"; exit 1; }
set +e; out="$("$Z" export "$T/c.yaml" -o "$T/x.safetensors" 2>&1)"; rc=$?; set -e
[ $rc -ne 0 ] && echo "a file that is not weights: exit $rc, $out" || { echo "export of a YAML file succeeded"; exit 1; }

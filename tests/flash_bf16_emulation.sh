#!/usr/bin/env bash
# flash_bf16_emulation.sh BUILD SOURCE - flash attention's bf16 products give the same bits with
# AVX512_BF16's vdpbf16ps and with its emulation (src/kernels/vecbf16.h: nearest-even rounding in
# integer vector code, two fused multiply-adds per pair in the instruction's order): the bf16 test
# (tests/test_flash_attention_bf16.c) run on the kernels' avx512_bf16 level and on their avx512
# level (ZT_ISA, src/kernels/dispatch.c: the same 16-lane tiles, the instruction emulated) must
# both pass and print the same hashes of the kernel's outputs and gradients, case by case; and
# on the avx2 level (8-lane tiles, emulated) it must pass. Skipped (77) on a CPU without
# AVX512_BF16 (there is no instruction to compare with; test_flash_attention_bf16 and its _avx2 run
# check the emulation's bounds).
set -uo pipefail
BUILD="$1"
ZT="$BUILD/zerotrain" bin="$BUILD/tests/test_flash_attention_bf16"
ZT_ISA=avx512_bf16 "$ZT" version >/dev/null 2>&1 || { echo "skip: this CPU has no AVX512_BF16"; exit 77; }
a="$(ZT_ISA=avx512_bf16 "$bin" 2>&1)" || { echo "FAIL: the avx512_bf16 run failed"; echo "$a" | tail -20; exit 1; }
b="$(ZT_ISA=avx512 "$bin" 2>&1)" || { echo "FAIL: the avx512 (emulated) run failed"; echo "$b" | tail -20; exit 1; }
c="$(ZT_ISA=avx2 "$bin" 2>&1)" || { echo "FAIL: the avx2 (emulated, 8 lanes) run failed"; echo "$c" | tail -20; exit 1; }
ha="$(grep "kernel's bits" <<<"$a")" hb="$(grep "kernel's bits" <<<"$b")"
[ -n "$ha" ] && [ "$(wc -l <<<"$ha")" -ge 7 ] || { echo "FAIL: no hashes printed"; exit 1; }
if [ "$ha" = "$hb" ]; then echo "ok   $(wc -l <<<"$ha") cases: the same bits with vdpbf16ps and with its emulation; avx2 passes"; exit 0; fi
echo "FAIL: the bits differ"; diff <(echo "$ha") <(echo "$hb"); exit 1

#!/usr/bin/env bash
# flash_bf16_emulation.sh BUILD SOURCE - flash attention's bf16 products give the same bits with
# AVX512_BF16's vdpbf16ps and with its emulation (src/kernels/vecbf16.h: nearest-even rounding in
# integer vector code, two fused multiply-adds per pair in the instruction's order): the bf16 test
# (tests/test_flash_attention_bf16.c) built natively and built without AVX512_BF16
# (test_flash_attention_bf16_emulated, tests/CMakeLists.txt) must both pass and print the same
# hashes of the kernel's outputs and gradients, case by case. Skipped (77) where that second binary
# is not built (ZT_NATIVE off, or a compiler without -mno-avx512bf16). On a CPU without
# AVX512_BF16 both binaries run the emulation, and the comparison still holds.
set -uo pipefail
BUILD="$1"
native="$BUILD/tests/test_flash_attention_bf16" emulated="$BUILD/tests/test_flash_attention_bf16_emulated"
[ -x "$emulated" ] || { echo "skip: $emulated not built"; exit 77; }
a="$("$native" 2>&1)" || { echo "FAIL: the native bf16 test failed"; echo "$a" | tail -20; exit 1; }
b="$("$emulated" 2>&1)" || { echo "FAIL: the emulated bf16 test failed"; echo "$b" | tail -20; exit 1; }
ha="$(grep "kernel's bits" <<<"$a")" hb="$(grep "kernel's bits" <<<"$b")"
[ -n "$ha" ] && [ "$(wc -l <<<"$ha")" -ge 7 ] || { echo "FAIL: no hashes printed"; exit 1; }
grep -m1 'vdot_bf16' <<<"$a"
grep -m1 'vdot_bf16' <<<"$b"
if [ "$ha" = "$hb" ]; then echo "ok   $(wc -l <<<"$ha") cases: the same bits with and without AVX512_BF16"; exit 0; fi
echo "FAIL: the bits differ"; diff <(echo "$ha") <(echo "$hb"); exit 1

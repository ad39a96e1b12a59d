#!/usr/bin/env bash
# param_store_fields.sh BUILD SOURCE - the parameter store is the one owner of where parameters
# live (src/engine/param_store.h): its private header is included by the store's files only, so
# no other file can name a placement field (the compiler refuses: the struct is opaque there);
# the engine's old placement fields are named nowhere in src/; checkpoints reach the engine
# through engine_state.h, never engine_internal.h.
set -uo pipefail
SRC="$2"
cd "$SRC" || exit 1
fail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fail=1; }

store="src/engine/param_store.c src/engine/param_bf16.c src/engine/master_shard.c src/engine/param_offload.c src/engine/compute_copy.c src/engine/param_quant.c"
users="$(grep -rl --include='*.c' --include='*.h' '#include "engine/param_store_internal.h"' src | sort | tr '\n' ' ')"
want="$(printf '%s\n' $store | sort | tr '\n' ' ')"
[ "$users" = "$want" ] && ok "param_store_internal.h is included by the store's files only" ||
  bad "param_store_internal.h is included by: $users (the store: $want)"

old='(->|\.)(full_params|pieces16|full16|full32|full32_off|params16|shard_master|param_kind|param_tmp|param_chunk)\b|\b(e|eng|engine)->(full_lp|lp_stale|gathered|gathered_lp|gather_seq|pieces)\b'
hits="$(grep -rnE "$old" src || true)"
[ -z "$hits" ] && ok "no file names the engine's old placement fields" || bad "old placement fields named outside the store:
$hits"

ck="$(grep -rln '#include "engine/engine_internal.h"' src/ckpt src/memory src/cli 2>/dev/null || true)"
[ -z "$ck" ] && ok "ckpt/, memory/ and cli/ do not include engine_internal.h" || bad "engine_internal.h included by: $ck"
exit $fail

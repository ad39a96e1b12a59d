#!/usr/bin/env bash
# install_pkgconfig.sh BUILD SOURCE - `cmake --install` into a temporary prefix, then build and run
# a small program against the installed header and library found through pkg-config, both static
# and shared.
set -euo pipefail
BUILD="$1"; SRC="$2"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
cmake --install "$BUILD" --prefix "$tmp/prefix" >/dev/null
pc="$(dirname "$(find "$tmp/prefix" -name zerotrain.pc | head -n1)")"
test -n "$pc" || { echo "zerotrain.pc was not installed"; exit 1; }
test -x "$tmp/prefix/bin/zerotrain" || { echo "the zerotrain command was not installed"; exit 1; }
cat > "$tmp/use.c" <<'C'
#include <zerotrain/zerotrain.h>
#include <stdio.h>
int main(void) {
    zt_error err = {0};
    zt_gpt2_config cfg;
    zt_model *m;
    if (zt_gpt2_preset("tiny", &cfg, &err) || zt_gpt2_create(&cfg, &m, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    printf("%s %s: %d units, %lld parameters\n", m->name, ZT_VERSION, m->n_units, (long long)zt_model_numel(m));
    zt_model_free(m);
    return 0;
}
C
export PKG_CONFIG_PATH="$pc"
gcc "$tmp/use.c" -o "$tmp/use_shared" $(pkg-config --cflags --libs zerotrain) -Wl,-rpath,"$(pkg-config --variable=libdir zerotrain)"
"$tmp/use_shared"
gcc "$tmp/use.c" -o "$tmp/use_static" $(pkg-config --cflags zerotrain) \
    "$(pkg-config --variable=libdir zerotrain)/libzerotrain.a" $(pkg-config --libs --static zerotrain | sed 's/-lzerotrain//')
"$tmp/use_static"

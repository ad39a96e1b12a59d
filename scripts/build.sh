#!/usr/bin/env bash
# build.sh - configures and builds zerotrain into build/ (Release; one build for every x86-64-v3 CPU,
# the kernels compiled once per instruction-set level and chosen at run time: docs/design.md).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cmake -S "$ROOT" -B "$ROOT/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$ROOT/build" -j"$(nproc)"

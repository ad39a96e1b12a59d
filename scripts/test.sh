#!/usr/bin/env bash
# test.sh - the README's test command: installs what is missing, builds, runs every test (ctest).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup.sh"
bash "$ROOT/scripts/build.sh"
cd "$ROOT/build"
OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}" ctest --output-on-failure "$@"

#!/usr/bin/env bash
# test.sh - the README's test command: installs what is missing, builds, runs every test (ctest).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup.sh"
bash "$ROOT/scripts/build.sh"
cd "$ROOT/build"
# passive OpenMP waits: a test's threads sleep instead of spinning when another process holds a
# core (spinning threads of an oversubscribed test burned 2.5 CPU-minutes in a 4 s test); results
# do not depend on it (no sum depends on the thread count). Tests run $(nproc) at a time
# (ZT_TEST_JOBS overrides): most wait on process start-up more than they compute, and the ones
# that time themselves run alone (RUN_SERIAL, tests/CMakeLists.txt); extra ctest arguments follow.
OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}" OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}" \
  ctest --output-on-failure -j"${ZT_TEST_JOBS:-$(nproc)}" "$@"

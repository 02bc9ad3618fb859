#!/usr/bin/env bash
# Builds roundscope in build/ and runs the whole test suite (exhaustive tests included), and
# beside it fuzzes the tensor-file readers and the command line (tools/fuzz.sh: clang,
# build-fuzz/, 60 seconds each): the fuzzers, one thread each, fill a core the tests leave idle.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DROUNDSCOPE_WERROR=ON
cmake --build build -j "$jobs"
tools/fuzz.sh 60 > build/fuzz.log 2>&1 &
fuzz=$!
status=0
ctest --test-dir build -j "$jobs" --output-on-failure --timeout 1500 || status=$?
fuzz_status=0
wait "$fuzz" || fuzz_status=$?
echo "---- fuzzing the tensor readers and the command line (tools/fuzz.sh 60) ----"
cat build/fuzz.log
if ((fuzz_status != 0)); then
  echo "fuzzing failed (exit $fuzz_status)"
  exit "$fuzz_status"
fi
exit "$status"

#!/usr/bin/env bash
# Builds roundscope in build/ and runs the whole test suite (exhaustive tests included), and
# beside it fuzzes the tensor-file readers, the command line, the report page writer and the
# GPU kit's ingest (tools/fuzz.sh: libFuzzer and atheris, 60 seconds each): the fuzzers, one
# thread each, fill a core the tests leave idle.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
# How long each phase took, for the suite's time budget (45 minutes with setup on two cores).
phase() { echo "---- $1: $SECONDS s since tools/test.sh started ----"; }
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DROUNDSCOPE_WERROR=ON
cmake --build build -j "$jobs"
phase "built"
tools/fuzz.sh 60 > build/fuzz.log 2>&1 &
fuzz=$!
status=0
ctest --test-dir build -j "$jobs" --output-on-failure --timeout 1500 || status=$?
phase "tests run"
fuzz_status=0
wait "$fuzz" || fuzz_status=$?
phase "fuzzing done"
echo "---- fuzzing the tensor readers, the command line, the report page and ingest (tools/fuzz.sh 60) ----"
cat build/fuzz.log
if ((fuzz_status != 0)); then
  echo "fuzzing failed (exit $fuzz_status)"
  exit "$fuzz_status"
fi
exit "$status"

#!/usr/bin/env bash
# Builds roundscope in build/ and runs the whole test suite (exhaustive tests included), then
# fuzzes the tensor-file readers.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "$jobs"
ctest --test-dir build -j "$jobs" --output-on-failure --timeout 1500
# The tensor readers under libFuzzer with ASan and UBSan for 60 seconds (clang, build-fuzz/).
tools/fuzz.sh 60

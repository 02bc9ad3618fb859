#!/usr/bin/env bash
# Fuzzes the safetensors and .npy readers for SECONDS (default 60) with libFuzzer under
# AddressSanitizer and UndefinedBehaviorSanitizer, starting from the hostile-file corpus of
# tests/lib/hostile_corpus.cpp. Exits non-zero on any finding. Builds in build-fuzz/.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
mkdir -p build-fuzz
log=build-fuzz/build.log
cmake -S . -B build-fuzz -DROUNDSCOPE_FUZZ=ON -DROUNDSCOPE_CUDA=OFF -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo > "$log" 2>&1 || { cat "$log"; exit 1; }
cmake --build build-fuzz -j "$(nproc)" >> "$log" 2>&1 || { cat "$log"; exit 1; }
rm -rf build-fuzz/corpus build-fuzz/seeds
mkdir -p build-fuzz/corpus build-fuzz/seeds
build-fuzz/tests/fuzz/write_fuzz_seeds build-fuzz/seeds
# No single allocation may exceed 256 MB for inputs of at most 8 KB: the readers must never
# trust a length or shape in the file before checking it against the file's size.
build-fuzz/tests/fuzz/fuzz_tensor_readers -max_total_time="$seconds" -max_len=8192 -malloc_limit_mb=256 \
  -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 -artifact_prefix=build-fuzz/ \
  build-fuzz/corpus build-fuzz/seeds > build-fuzz/fuzz.log 2>&1 || status=$?
# The run's verdict: a finding's report, or the final statistics.
grep -v '^#[0-9]' build-fuzz/fuzz.log | grep -v -e '^"' -e 'NEW_FUNC' | tail -25
exit "${status:-0}"

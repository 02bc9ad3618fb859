#!/usr/bin/env bash
# Fuzzes, each for SECONDS (default 60), with libFuzzer under AddressSanitizer and
# UndefinedBehaviorSanitizer:
#   - the safetensors and .npy readers, from the hostile-file corpus of tests/lib/hostile_corpus.cpp;
#   - the command line (every command's option parsing and checks), from seeds and a dictionary
#     the app writes of itself (tests/fuzz/write_cli_fuzz_seeds.cpp);
# and with atheris (libFuzzer for Python), from structured JSON mutations (tests/fuzz/json_mutator.py):
#   - the report page and TensorBoard writers, from reports `roundscope report` wrote;
#   - the GPU kit's ingest (tools/gpu/ingest.py), from phases as the kit writes them.
# Exits non-zero on any finding. Builds the C++ fuzzers in build-fuzz/; the Python ones run the
# package and programs of build/ (tools/test.sh builds it first) with .venv's Python.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
mkdir -p build-fuzz
log=build-fuzz/build.log
cmake -S . -B build-fuzz -DROUNDSCOPE_FUZZ=ON -DROUNDSCOPE_CUDA=OFF -DROUNDSCOPE_WERROR=ON -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo > "$log" 2>&1 || { cat "$log"; exit 1; }
cmake --build build-fuzz -j "$(nproc)" >> "$log" 2>&1 || { cat "$log"; exit 1; }

# fuzz TARGET MAX_LEN SEEDS [libFuzzer options]: a run's verdict is a finding's report or the
# final statistics.
fuzz() {
  local target=$1 max_len=$2 seeds=$3
  shift 3
  local corpus=build-fuzz/corpus-$target status=0
  rm -rf "$corpus" && mkdir -p "$corpus"
  echo "== $target, $seconds s"
  build-fuzz/tests/fuzz/"$target" -max_total_time="$seconds" -max_len="$max_len" -rss_limit_mb=2048 \
    -timeout=10 -print_final_stats=1 -artifact_prefix=build-fuzz/"$target"- "$@" "$corpus" "$seeds" \
    > build-fuzz/"$target".log 2>&1 || status=$?
  grep -v '^#[0-9]' build-fuzz/"$target".log | grep -v -e '^"' -e 'NEW_FUNC' | tail -25
  return "$status"
}

rm -rf build-fuzz/seeds build-fuzz/cli-seeds
mkdir -p build-fuzz/seeds build-fuzz/cli-seeds
build-fuzz/tests/fuzz/write_fuzz_seeds build-fuzz/seeds
build-fuzz/tests/fuzz/write_cli_fuzz_seeds build-fuzz/cli-seeds build-fuzz/cli.dict
status=0
# No single allocation may exceed 256 MB for inputs of at most 8 KB: the readers must never
# trust a length or shape in the file before checking it against the file's size.
fuzz fuzz_tensor_readers 8192 build-fuzz/seeds -malloc_limit_mb=256 || status=$?
fuzz fuzz_cli_options 512 build-fuzz/cli-seeds -dict=build-fuzz/cli.dict || status=$?

# pyfuzz NAME MAX_LEN SEEDS: the atheris fuzzer NAME.py of tests/fuzz from the seeds of that name, as fuzz does.
pyfuzz() {
  local name=$1 max_len=$2 seeds=tests/fuzz/seeds/$3
  local corpus=build-fuzz/corpus-$name status=0
  rm -rf "$corpus" && mkdir -p "$corpus"
  echo "== $name, $seconds s"
  PYTHONPATH=build/python .venv/bin/python tests/fuzz/"$name".py -max_total_time="$seconds" -max_len="$max_len" \
    -rss_limit_mb=2048 -timeout=20 -print_final_stats=1 -artifact_prefix=build-fuzz/"$name"- "$corpus" "$seeds" \
    > build-fuzz/"$name".log 2>&1 || status=$?
  grep -v '^#[0-9]' build-fuzz/"$name".log | grep -v -e '^INFO: Instrumenting' -e '^WARNING: Failed to find' | tail -25
  return "$status"
}
pyfuzz fuzz_report_page 131072 report_page || status=$?
pyfuzz fuzz_ingest 65536 ingest || status=$?
exit "$status"

#!/bin/sh
# The benchmarks that depend on SIMD width, once per Highway target this CPU runs (best first),
# in one run on one machine: the per-target tables of docs/performance.md.
#
#   tools/bench/bench_targets.sh [BUILD_DIR]   (default: build)
set -eu
bench="${1:-build}/tools/bench"
targets=$("$bench/bench_truth" --n 1 --reference-n 1 | sed -n 's/^SIMD target: [A-Z0-9_]* (this CPU and build: \(.*\))$/\1/p' | tr -d ',')
for target in $targets; do
    echo "=== $target"
    "$bench/bench_cast" --simd "$target" --quick | grep -E "SIMD target|^to |rne  in-cache  1 "
    "$bench/bench_truth" --simd "$target" | tail -4
    "$bench/bench_flash" --simd "$target" | tail -3
done

#!/usr/bin/env bash
# Every C++ and CUDA file the repository tracks is as the repository's .clang-format writes it
# (clang-format 14, Debian 12's): exit 1, naming the lines that differ, otherwise. Fix with
#   git ls-files '*.cpp' '*.hpp' '*.cu' '*.cuh' '*.h' | xargs clang-format -i
set -euo pipefail
cd "${1:-$(dirname "$0")/../..}"
command -v clang-format > /dev/null || { echo "check_format.sh: clang-format not found (tools/setup.sh installs it)"; exit 1; }
if ! git ls-files -z '*.cpp' '*.hpp' '*.cu' '*.cuh' '*.h' | xargs -0 clang-format --dry-run --Werror; then
  echo "check_format.sh: files differ from .clang-format (see above)"
  exit 1
fi

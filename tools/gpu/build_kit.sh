#!/usr/bin/env bash
# Builds the GPU kit on the CPU (docs/gpu.md): the CUDA programs for sm_90a, stripped, with the
# shared libraries they need that a bare GPU machine may lack (fmt, Highway, MPFR, MPFI, GMP,
# libstdc++), and manifest.json (commit, sizes, SHA-256). The kit then travels with the working
# tree (the device tool's `carry`) and tools/gpu/run_all.sh runs it.
#
#   tools/gpu/build_kit.sh [--from BUILD] [--out KIT]
#     --from BUILD  package the programs of an existing build instead of configuring build-gpukit/
#                   (the kit's dry run packages the CPU build: the host programs, and the CUDA ones
#                   where that build has them)
#     --out KIT     where the kit goes (default build-gpukit/kit)
# Exit 0 with the kit checked (every library resolved from the kit, each program starts, under
# 56 MiB; 64 MiB, the carry limit, when packaged from a build for more architectures than
# sm_90a), 1 when a check fails, 2 on bad arguments.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
from="" out="$root/build-gpukit/kit"
refuse() { echo "build_kit.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --from|--out)
      [ $# -ge 2 ] && [ -n "$2" ] && [ "${2#--}" = "$2" ] || refuse "$1 needs a folder"
      if [ "$1" = --from ]; then from=$2; else out=$2; fi
      shift 2 ;;
    *) refuse "unknown argument '$1' (expected --from BUILD, --out KIT)" ;;
  esac
done
[ -z "$from" ] || [ -d "$from" ] || refuse "--from: $from is not a folder"
# The kit folder is replaced whole, so it must be one: a folder that is empty, new, or a kit
# (its manifest.json), and neither the repository, the build, nor a folder holding either.
out=$(realpath -m -- "$out")
[ ! -e "$out" ] || [ -d "$out" ] || refuse "--out: $out is a file, not a kit folder"
if [ -d "$out" ] && [ -n "$(ls -A "$out")" ] && [ ! -f "$out/manifest.json" ]; then
  refuse "--out: $out holds files and is not a kit (no manifest.json); build_kit.sh replaces only a kit"
fi
for held in "$root" ${from:+"$(realpath -m -- "$from")"}; do
  case "$held/" in "$out"/*) refuse "--out: $out holds $held; give the kit a folder of its own" ;; esac
done

# The programs a GPU session runs, and the host programs of the dry run (paths in the build).
gpu_programs="./roundscope ./tests/test_gpu_mma ./tests/test_gpu_cast ./tests/test_gpu_flash ./tools/gpu/gpu_sweep
  ./tools/gpu/bench_flash_gpu"
common_programs="./tools/gpu/mufu_probe ./tools/gpu/kit_inputs ./tools/gpu/mufu_fit ./tools/gpu/gpu_sweep_host
  ./tools/gpu/bench_flash_gpu_host ./tests/test_gpu_host"

if [ -z "$from" ]; then
  build="$root/build-gpukit"
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DROUNDSCOPE_CUDA=ON \
    -DROUNDSCOPE_CUDA_ARCHITECTURES="90a-real;90-virtual" >/dev/null
  targets=""
  for p in $gpu_programs $common_programs; do targets="$targets $(basename "$p")"; done
  # shellcheck disable=SC2086
  cmake --build "$build" -j"$(nproc)" --target $targets
  from=$build
fi
from=$(cd "$from" && pwd)

rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
packaged=""
for p in $gpu_programs $common_programs; do
  if [ -x "$from/$p" ]; then
    strip --strip-unneeded -o "$out/bin/$(basename "$p")" "$from/$p"
    packaged="$packaged $(basename "$p")"
  else
    # shellcheck disable=SC2086
    case " $(echo $gpu_programs) " in
      *" $p "*) echo "build_kit.sh: $p not in $from (a build without CUDA): left out" >&2 ;;
      *) echo "build_kit.sh: $p missing from $from" >&2; exit 1 ;;
    esac
  fi
done

# Bundle every shared library but glibc's own (which must match the machine's kernel and
# loader) and the driver's libcuda (the GPU machine's own; the CUDA runtime is linked statically).
for b in "$out"/bin/*; do
  ldd "$b" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|ld-linux*|libcuda.so*) ;;
      *) [ -e "$out/lib/$(basename "$lib")" ] || cp -L "$lib" "$out/lib/" ;;
    esac
  done
done

# Checks: each program finds every library it needs in the kit, and starts.
status=0
for b in "$out"/bin/*; do
  if LD_LIBRARY_PATH="$out/lib" ldd "$b" | grep -q "not found"; then
    echo "build_kit.sh: $(basename "$b") needs a library the kit lacks:" >&2
    LD_LIBRARY_PATH="$out/lib" ldd "$b" | grep "not found" >&2
    status=1
  fi
done
if [ -x "$out/bin/roundscope" ]; then
  LD_LIBRARY_PATH="$out/lib" "$out/bin/roundscope" --version >/dev/null || { echo "build_kit.sh: roundscope does not start" >&2; status=1; }
fi
for b in mufu_probe kit_inputs mufu_fit gpu_sweep_host; do
  rc=0
  LD_LIBRARY_PATH="$out/lib" "$out/bin/$b" --no-such-option >/dev/null 2>&1 || rc=$?
  [ "$rc" = 2 ] || { echo "build_kit.sh: $b does not start (exit $rc, expected 2 on a bad option)" >&2; status=1; }
done

commit=$(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)
git -C "$root" diff --quiet HEAD 2>/dev/null || commit="$commit-dirty"
python3 - "$out" "$commit" "$from" <<'EOF'
import hashlib, json, os, pathlib, sys, time
out, commit, source = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3]
files = []
for p in sorted(out.rglob("*")):
    if p.is_file() and p.name != "manifest.json":
        files.append({"path": str(p.relative_to(out)), "bytes": p.stat().st_size,
                      "sha256": hashlib.sha256(p.read_bytes()).hexdigest()})
cache = pathlib.Path(source) / "CMakeCache.txt"
archs = "unknown"
if cache.exists():
    for line in cache.read_text().splitlines():
        if line.startswith("ROUNDSCOPE_CUDA_ARCHITECTURES:"):
            archs = line.split("=", 1)[1]
manifest = {"commit": commit, "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "cuda_architectures": archs, "gpu_programs": [f["path"] for f in files if f["path"].startswith("bin/")],
            "bytes": sum(f["bytes"] for f in files), "files": files}
(out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
EOF
bytes=$(du -sb "$out" | cut -f1)
# The kit's budget, 56 MiB, is that of a kit for sm_90a: 64 MiB may travel, the kit beside the
# tracked files, less tests/data/golden (about 5 MiB; the golden files, which no GPU step reads,
# are set aside for the call: docs/gpu.md). A kit packaged from a build for more architectures
# (the dry run's, with sm_80 and sm_89 code in every CUDA program) is held to the carry limit.
limit_mib=56
archs=$(sed -n 's/^ROUNDSCOPE_CUDA_ARCHITECTURES:[A-Z]*=//p' "$from/CMakeCache.txt" 2>/dev/null)
if [ -n "$archs" ] && [ "$archs" != "90a-real;90-virtual" ] && [ -n "$(ls "$from"/tests/test_gpu_mma 2>/dev/null)" ]; then
  limit_mib=64
  echo "build_kit.sh: packaged from a build for $archs, not the kit's 90a-real;90-virtual: held to 64 MiB" >&2
fi
if [ "$bytes" -gt $((limit_mib * 1024 * 1024)) ]; then
  echo "build_kit.sh: the kit is $bytes bytes, over $limit_mib MiB" >&2
  status=1
fi
echo "build_kit.sh: kit in $out ($((bytes / 1024)) KiB; programs:$packaged)"
exit $status

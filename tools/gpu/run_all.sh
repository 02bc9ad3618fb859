#!/usr/bin/env bash
# Runs one phase of the GPU kit (docs/gpu.md) and packs what it found into at most 8 files of
# at most 15 MiB (summary.json and up to 7 .tar.xz archives, the most valuable first).
#
#   tools/gpu/run_all.sh PHASE [--dry-run] [--kit KIT] [--out DIR]
#     PHASE      A (hardware facts), B (our kernels), C (sanitizers and PyTorch's SDPA backends),
#                H (the Hopper check, tools/gpu/hopper_check.sh: the Hopper kernel first, one call)
#     --dry-run  no GPU: our kernels on the simulated GPU, an invented MUFU, PyTorch on the CPU;
#                what needs hardware is recorded as skipped (the kit's CTest, label `kit`)
#     --kit      the kit of build_kit.sh (default build-gpukit/kit)
#     --out      where the packed files go (default $OUT, the device tool's folder, else kit-out)
# Every step has its own timeout and the phase goes on after a failure; it never touches clocks
# or GPU settings. Exit 0 when every step that ran passed, 1 otherwise, 2 on bad arguments.
set -uo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
phase="" dry=0 kit="$root/build-gpukit/kit" out="${OUT:-$root/kit-out}"
refuse() { echo "run_all.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    A|B|C|H) [ -z "$phase" ] || refuse "one phase a run: $phase and $1 given"; phase=$1; shift ;;
    --dry-run) dry=1; shift ;;
    --kit|--out)
      [ $# -ge 2 ] && [ -n "$2" ] && [ "${2#--}" = "$2" ] || refuse "$1 needs a folder"
      if [ "$1" = --kit ]; then kit=$2; else out=$2; fi
      shift 2 ;;
    *) refuse "unknown argument '$1' (expected A, B, C or H, --dry-run, --kit, --out)" ;;
  esac
done
[ -n "$phase" ] || refuse "which phase? A, B, C or H"
# Lowers the Hopper kernel's steps' timeouts (kernel_step; the kit's tests make a hang short).
kernel_limit=${ROUNDSCOPE_KIT_KERNEL_TIMEOUT_S:-}
case "$kernel_limit" in
  ""|[1-9]|[1-9][0-9]|[1-9][0-9][0-9]) ;;
  *) refuse "ROUNDSCOPE_KIT_KERNEL_TIMEOUT_S: '$kernel_limit' is not 1 to 999 seconds" ;;
esac
[ -f "$kit/manifest.json" ] || refuse "no kit in '$kit' (run tools/gpu/build_kit.sh)"
kit=$(cd "$kit" && pwd)
# Checked before any step runs: a phase's device time is not spent to find the output unwritable.
[ ! -e "$out" ] || [ -d "$out" ] || refuse "--out: $out is a file, not a folder"
mkdir -p "$out" 2>/dev/null && [ -w "$out" ] || refuse "--out: cannot make or write into $out"
out=$(cd "$out" && pwd)
case "$out/" in "$kit"/*) refuse "--out: $out is inside the kit $kit; pack elsewhere" ;; esac
work=$(mktemp -d "${TMPDIR:-/tmp}/roundscope-kit-$phase.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/logs"
# The Python with torch: ROUNDSCOPE_PYTHON, the active virtual environment, the repository's
# .venv (CI), or the machine's python3 (the GPU machine's has torch).
python=${ROUNDSCOPE_PYTHON:-}
[ -z "$python" ] && [ -n "${VIRTUAL_ENV:-}" ] && python="$VIRTUAL_ENV/bin/python"
[ -z "$python" ] && [ -x "$root/.venv/bin/python" ] && python="$root/.venv/bin/python"
[ -z "$python" ] && python=$(command -v python3 || command -v python)
threads=$(nproc)

# Our programs run with the kit's libraries; nothing else sees them.
kitrun() { LD_LIBRARY_PATH="$kit/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$@"; }

# step NAME TIMEOUT_S COMMAND...: runs the command (a program or one of the functions here) in
# $work/NAME under its own timeout, with its log; records the outcome (also in $last_status).
last_status=""
step() {
  local name=$1 limit=$2
  shift 2
  mkdir -p "$work/$name"
  local start rc status=ok
  start=$(date +%s%N)
  (cd "$work/$name" && timeout --kill-after=10 "$limit" bash -c '"$@"' bash "$@") >"$work/logs/$name.log" 2>&1
  rc=$?
  [ $rc -ne 0 ] && status=failed
  { [ $rc -eq 124 ] || [ $rc -eq 137 ]; } && status=timeout
  local ms=$((($(date +%s%N) - start) / 1000000))
  printf '{"name": "%s", "status": "%s", "rc": %d, "timeout_s": %d, "seconds": %d.%03d}\n' \
    "$name" "$status" "$rc" "$limit" $((ms / 1000)) $((ms % 1000)) >>"$work/steps.jsonl"
  echo "run_all.sh: $phase/$name: $status (exit $rc)"
  last_status=$status
}

# kernel_step NAME TIMEOUT_S COMMAND...: a step that runs the Hopper kernel; once one has hung (its
# timeout), the later ones are skipped: a hung kernel can hold the GPU, and each would cost its
# whole timeout.
# ROUNDSCOPE_KIT_KERNEL_TIMEOUT_S lowers their timeouts.
hung=""
kernel_step() {
  if [ -n "$hung" ]; then
    skip "$1" "$2" "the Hopper kernel hung in step $hung"
    return
  fi
  local name=$1 limit=$2
  shift 2
  [ -n "$kernel_limit" ] && [ "$kernel_limit" -lt "$limit" ] && limit=$kernel_limit
  step "$name" "$limit" "$@"
  [ "$last_status" = timeout ] && hung=$name
  return 0
}

# skip NAME TIMEOUT_S WHY: a step this machine cannot run, with the reason.
skip() {
  printf '{"name": "%s", "status": "skipped", "rc": 0, "timeout_s": %d, "seconds": 0, "why": "%s"}\n' \
    "$1" "$2" "$3" >>"$work/steps.jsonl"
  echo "run_all.sh: $phase/$1: skipped ($3)"
}

have() { command -v "$1" >/dev/null 2>&1; }

metadata() {
  {
    echo "== manifest"; cat "$kit/manifest.json"
    echo "== host"; uname -a; nproc; free -g 2>/dev/null | head -2
    echo "== nvidia-smi"; have nvidia-smi && nvidia-smi -q || echo "absent"
    echo "== nvcc"; have nvcc && nvcc --version || echo "absent"
    echo "== torch"
    "$python" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda,
"cudnn", torch.backends.cudnn.version() if torch.cuda.is_available() else None,
"device", torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none")' 2>&1 || echo "no torch"
    echo "== roundscope"; kitrun "$kit/bin/roundscope" --version
  } >metadata.txt 2>&1
}

# The MMA probe, then its capture made small (trim_probe.py: 80 raw tiles a file and every
# tile's digests; the full files, 16 MB each for wgmma, would not come back within 8 files).
probe() {
  kitrun "$kit/bin/roundscope" probe --out full --tiles 256 || return 1
  "$python" "$root/tools/gpu/trim_probe.py" full/mma_*.safetensors full/wgmma_*.safetensors --out . || return 1
  mv full/conversions.safetensors . 2>/dev/null
  rm -rf full
}

# The SASS of our kernels, the Hopper kernel's speed estimated from it (sass_estimate.py), its
# wgmma register hazards (sass_lint.py: the step fails on one), and the canary's reading of
# torch's flash kernels where the machine has cuobjdump.
sass() {
  kitrun cuobjdump -sass "$kit/bin/roundscope" >roundscope.sass
  kitrun cuobjdump -res-usage "$kit/bin/roundscope" >roundscope.resources
  "$python" "$root/tools/gpu/sass_estimate.py" --sass roundscope.sass --resources roundscope.resources --json \
    >estimate.jsonl
  "$python" "$root/tools/gpu/torch_flash_sass.py" --out torch_flash.json --sass torch_flash.sass
  local torch_rc=$?
  "$python" "$root/tools/gpu/sass_lint.py" --sass roundscope.sass >lint.txt || return 1
  return $torch_rc
}

# The SASS estimate and wgmma lint of the binary the Hopper check ran (the listing itself stays
# here: megabytes, and made again from the kit).
hopper_sass() {
  kitrun cuobjdump -sass "$kit/bin/roundscope" >roundscope.sass || return 1
  kitrun cuobjdump -res-usage "$kit/bin/roundscope" >roundscope.resources
  "$python" "$root/tools/gpu/sass_estimate.py" --sass roundscope.sass --resources roundscope.resources --json \
    >estimate.jsonl
  local status=$?
  "$python" "$root/tools/gpu/sass_lint.py" --sass roundscope.sass >lint.txt || status=1
  rm -f roundscope.sass
  return $status
}

inputs() {  # the SDPA captures' inputs: every shape x scenario, made here from their seed
  mkdir -p inputs
  local shape heads n d
  for spec in "S1 2 128 64" "S3 14 1000 128" "S2 1 1000 128" "S4 2 256 64" "S5 2 128 128"; do
    read -r shape heads n d <<<"$spec"
    case ",$1," in *",$shape,"*) ;; *) continue ;; esac
    for scenario in random sink repeated-max wide; do
      kitrun "$kit/bin/kit_inputs" --scenario "$scenario" --heads "$heads" --n "$n" --d "$d" --seed 7 \
        -o "inputs/${shape}_${scenario}.safetensors" || return 1
    done
  done
}
bench() {  # $1: device, $2 heads, $3 N, $4 D, $5 repeats: ours (bench_flash_gpu), then PyTorch's beside it,
  # on the same inputs (kit_inputs' random scenario; not packed)
  local program=bench_flash_gpu
  [ "$1" = cpu ] && program=bench_flash_gpu_host
  kitrun "$kit/bin/kit_inputs" --scenario random --heads "$2" --n "$3" --d "$4" --seed 1 -o inputs.safetensors \
    || return 1
  kitrun "$kit/bin/$program" --presets fa2-bf16,fa3-fp8,h100-bf16 --inputs inputs.safetensors --repeats "$5" \
    --out ours.jsonl
  local status=$?
  "$python" "$root/tools/gpu/bench_sdpa.py" --device "$1" --inputs inputs.safetensors --repeats "$5" \
    --ours ours.jsonl --out bench.jsonl || status=1
  rm -f inputs.safetensors
  return $status
}
sdpa() {  # $1: shapes, $2: device
  inputs "$1" && "$python" "$root/tools/gpu/sdpa_capture.py" --inputs inputs --out . --device "$2" --shapes "$1" &&
    rm -rf inputs
}

# The Hopper kernel's raw answers (gpu/kernel_dump.hpp), for CI to check against the emulator on
# the CPU: $1 the sweep program, then its options (--set ...). A tile-edge case (N 65, D 64) and a
# many-tile one (N 1000, D 128: masked and whole tiles) of random and sink inputs, causal and not;
# on the simulated GPU ($1 gpu_sweep_host) the small one alone.
goldens() {
  local program=$1
  shift
  kitrun "$kit/bin/$program" --presets h100-bf16 --forward-only --scenarios random,sink --n 65 --d 64 \
    --dump . --out goldens.jsonl "$@" || return 1
  [ "$program" = gpu_sweep_host ] && return 0
  kitrun "$kit/bin/$program" --presets h100-bf16 --forward-only --scenarios random,sink --n 1000 --d 128 \
    --dump . --out goldens-1000.jsonl "$@"
}
# The Hopper kernel's speed (CUDA events), as the recipe runs and with one MUFU for exp2, beside
# PyTorch's backends on the same inputs: $1 device, $2 heads, $3 N, $4 D, $5 repeats. $6: "torch"
# to time PyTorch's alone (after the kernel hung).
bench_hopper() {
  local program=bench_flash_gpu status=0
  [ "$1" = cpu ] && program=bench_flash_gpu_host
  kitrun "$kit/bin/kit_inputs" --scenario random --heads "$2" --n "$3" --d "$4" --seed 1 -o inputs.safetensors \
    || return 1
  local ours=()
  if [ "${6:-}" != torch ]; then
    for set in "" "--set exp2=ex2.approx.ftz"; do
      # shellcheck disable=SC2086
      kitrun "$kit/bin/$program" --presets h100-bf16 $set --inputs inputs.safetensors --repeats "$5" \
        >>ours.jsonl || status=1
    done
    # the FP8 Hopper kernel (h100-fp8: E4M3 inputs cast from the same BF16 ones)
    kitrun "$kit/bin/$program" --presets h100-fp8 --inputs inputs.safetensors --repeats "$5" >>ours.jsonl || status=1
    # our other kernels (the mma.sync twins) in the same run, for their ratio to PyTorch's
    kitrun "$kit/bin/$program" --presets fa2-bf16,fa3-fp8 --inputs inputs.safetensors --repeats 2 >>ours.jsonl ||
      status=1
    ours=(--ours ours.jsonl)
  fi
  # the tensor cores' sustained rate beside them (a BF16 matmul; a small one on the CPU's dry run)
  local gemm=8192
  [ "$1" = cpu ] && gemm=64
  "$python" "$root/tools/gpu/bench_sdpa.py" --device "$1" --inputs inputs.safetensors --repeats "$5" \
    "${ours[@]}" --gemm "$gemm" --out bench.jsonl || status=1
  rm -f inputs.safetensors
  return $status
}

export kit root python
export -f kitrun have metadata probe sass hopper_sass inputs sdpa bench goldens bench_hopper

sanitizer_cases="--n 65 --d 64 --presets fa2-bf16,fa3-fp8,h100-bf16"
case "$phase" in
  A)
    step metadata 20 metadata
    if [ $dry = 1 ]; then
      skip probe 150 "dry run: the MMA probe needs a GPU (the simulated GPU's mma.sync is tested in B)"
      step mufu 240 kitrun "$kit/bin/mufu_probe" --fake --out . --threads "$threads" \
        --variants ex2.approx.f32,lg2.approx.f32,rcp.approx.ftz.f32
      skip sass 60 "dry run: cuobjdump is on the GPU machine"
    else
      step probe 150 probe
      step mufu 150 kitrun "$kit/bin/mufu_probe" --out .
      step sass 90 sass
    fi
    ;;
  B)
    step metadata 20 metadata
    if [ $dry = 1 ]; then
      step gpu-tests 120 kitrun "$kit/bin/test_gpu_host" "simulated GPU mma.sync probe equals the models"
      step sweep 200 kitrun "$kit/bin/gpu_sweep_host" --n 1,65 --d 64 --presets fa2-bf16,fa3-fp8,h100-bf16 \
        --scenarios random,sink --out sweep.jsonl --threads "$threads"
      step bench 60 bench cpu 2 128 64 3
    else
      step gpu-tests 90 env ROUNDSCOPE_REQUIRE_GPU=1 bash -c \
        'kitrun "$kit/bin/test_gpu_mma" && kitrun "$kit/bin/test_gpu_cast"'
      step sweep 330 kitrun "$kit/bin/gpu_sweep" --out sweep.jsonl --threads "$threads"
      step bench 90 bench cuda 64 4096 128 5  # B 4 x H 16
    fi
    ;;
  C)
    step metadata 20 metadata
    if [ $dry = 1 ] || ! have compute-sanitizer; then
      skip sanitizers 240 "$([ $dry = 1 ] && echo "dry run" || echo "compute-sanitizer absent"): needs a GPU"
      step sdpa 200 sdpa S1 cpu
    else
      step sanitizers 240 bash -c "for tool in memcheck racecheck initcheck synccheck; do
        echo \"== \$tool\"; kitrun compute-sanitizer --tool \$tool --error-exitcode 1 \
          '$kit/bin/test_gpu_flash' $sanitizer_cases || exit 1; done"
      step sdpa 200 sdpa S1,S3,S2,S4,S5 cuda
    fi
    ;;
  H)
    # One device call of at most 8 minutes (the timeouts sum to 475 s), the Hopper kernels first.
    step metadata 30 metadata
    hopper=(--presets h100-bf16 --forward-only)
    # the BF16 kernels forward and backward, and the FP8 kernel (E4M3 wgmma; forward only)
    both=(--presets h100-bf16,h100-fp8)
    ex2=(--set exp2=ex2.approx.ftz)
    if [ $dry = 1 ]; then
      kernel_step smoke 30 kitrun "$kit/bin/gpu_sweep_host" "${hopper[@]}" --n 65 --d 64 --scenarios random
      kernel_step sweep 75 kitrun "$kit/bin/gpu_sweep_host" "${both[@]}" --n 1,65 --d 64 --scenarios random,sink \
        --out sweep.jsonl --threads "$threads"
      kernel_step sweep-ex2 45 kitrun "$kit/bin/gpu_sweep_host" "${hopper[@]}" "${ex2[@]}" --n 1,65 --d 64 \
        --scenarios random,sink --out sweep.jsonl --threads "$threads"
      kernel_step goldens 60 bash -c 'mkdir -p default ex2.approx.ftz && (cd default && goldens gpu_sweep_host) &&
        cd ex2.approx.ftz && goldens gpu_sweep_host --set exp2=ex2.approx.ftz'
      step layout 60 kitrun "$kit/bin/test_gpu_host" "[wgmma][probe]"
      step bench 60 bench_hopper cpu 2 128 64 2
      skip sanitizers 90 "dry run: compute-sanitizer needs a GPU"
      skip sass 25 "dry run: cuobjdump is on the GPU machine"
    else
      kernel_step smoke 30 kitrun "$kit/bin/roundscope" crosscheck --recipe h100-bf16 --synthetic --n 65 --d 64 \
        --json
      kernel_step sweep 75 kitrun "$kit/bin/gpu_sweep" "${both[@]}" --out sweep.jsonl --threads "$threads"
      kernel_step sweep-ex2 45 kitrun "$kit/bin/gpu_sweep" "${hopper[@]}" "${ex2[@]}" --out sweep.jsonl --threads "$threads"
      kernel_step goldens 60 bash -c 'mkdir -p default ex2.approx.ftz && (cd default && goldens gpu_sweep) &&
        cd ex2.approx.ftz && goldens gpu_sweep --set exp2=ex2.approx.ftz'
      # the 80 BF16 wgmma layouts (V MN-major, 128-byte swizzle) and the 72 E4M3 ones (K-major, 32- to
      # 128-byte swizzles), and the pair casts' proofs on all 2^32 inputs
      step layout 60 env ROUNDSCOPE_REQUIRE_GPU=1 bash -c \
        'kitrun "$kit/bin/test_gpu_mma" && kitrun "$kit/bin/test_gpu_cast"'
      step bench 60 bench_hopper cuda 64 4096 128 10 $([ -n "$hung" ] && echo torch)  # B 1 x H 64
      # every ring stage reused (N 300: three KV tiles on two stages), D 64 and 128
      kernel_step sanitizers 90 bash -c "for tool in memcheck synccheck racecheck initcheck; do
        echo \"== \$tool\"; kitrun compute-sanitizer --tool \$tool --error-exitcode 1 \
          '$kit/bin/test_gpu_flash' --n 300 --d 64,128 --presets h100-bf16 || exit 1; done"
      if have cuobjdump; then step sass 25 hopper_sass; else skip sass 25 "cuobjdump absent"; fi
    fi
    ;;
esac

"$python" "$root/tools/gpu/kit_pack.py" --phase "$phase" --work "$work" --out "$out" --kit "$kit" \
  $([ $dry = 1 ] && echo --dry-run)

#!/usr/bin/env bash
# Runs one phase of the GPU kit (docs/gpu.md) and packs what it found into at most 8 files of
# at most 15 MiB (summary.json and up to 7 .tar.xz archives, the most valuable first).
#
#   tools/gpu/run_all.sh PHASE [--dry-run] [--kit KIT] [--out DIR]
#     PHASE      A (hardware facts), B (our kernels), C (sanitizers and PyTorch's SDPA backends)
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
    A|B|C) [ -z "$phase" ] || refuse "one phase a run: $phase and $1 given"; phase=$1; shift ;;
    --dry-run) dry=1; shift ;;
    --kit|--out)
      [ $# -ge 2 ] && [ -n "$2" ] && [ "${2#--}" = "$2" ] || refuse "$1 needs a folder"
      if [ "$1" = --kit ]; then kit=$2; else out=$2; fi
      shift 2 ;;
    *) refuse "unknown argument '$1' (expected A, B or C, --dry-run, --kit, --out)" ;;
  esac
done
[ -n "$phase" ] || refuse "which phase? A, B or C"
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
# $work/NAME under its own timeout, with its log; records the outcome.
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

inputs() {  # the SDPA captures' inputs: every shape x scenario, made here from their seed
  mkdir -p inputs
  local shape heads n d
  for spec in "S1 2 128 64" "S3 14 1000 128" "S2 1 1000 128"; do
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

export kit root python
export -f kitrun have metadata probe sass inputs sdpa bench

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
      step sdpa 200 sdpa S1,S3,S2 cuda
    fi
    ;;
esac

"$python" "$root/tools/gpu/kit_pack.py" --phase "$phase" --work "$work" --out "$out" --kit "$kit" \
  $([ $dry = 1 ] && echo --dry-run)

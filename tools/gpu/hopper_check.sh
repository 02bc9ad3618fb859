#!/usr/bin/env bash
# The one-call Hopper check (docs/gpu.md: run it first on a lent H100 or H200): the kit's phase H,
# the Hopper kernel first, at most 8 minutes, every step under its own timeout and the kernel's
# later steps skipped after a hang, packed for the device tool's return.
#
#   tools/gpu/hopper_check.sh [--dry-run] [--kit KIT] [--out DIR]     (run_all.sh H's options)
#
# One device call, with the kit built on the CPU first (tools/gpu/build_kit.sh):
#   run(command="bash tools/gpu/hopper_check.sh", carry=["build-gpukit/kit"], timeout_s=540)
# Then on the CPU: tools/gpu/ingest.py OUT --golden tests/data/golden/h100.
exec "$(dirname "$0")/run_all.sh" H "$@"

"""Includes point one way: each room of the source tree may include only rooms below it, as
docs/design.md's layout draws them. A room is a folder (lib/, the sub-folders of emu/ and of
emu/attention/, gpu/ and its sub-folders, analysis/ and analysis/truth/, api/ and api/report/, cli/ and its
sub-folder, python/module/); a file belongs to the deepest room that holds it. Its rank is in
LAYERS below, lowest first. A file may include its own room and any room of a lower rank; rooms
of one rank are independent of each other, except the pairs in TOGETHER (the kernels' building
blocks run on the simulated GPU under its build, so gpu/primitives/ and gpu/host/ are one
unit). Tests, tools and examples stand above everything.

Usage: check_layers.py [REPO]   (exit 1 and one line per include that points up or sideways)"""
import os
import re
import subprocess
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", ".."))

# Lowest first. Rooms on one line share a rank and may not include each other.
LAYERS = [
    ["lib"],
    ["emu/numbers"],
    ["emu/batch"],
    ["emu/block", "emu/mufu"],
    ["emu/mma"],
    ["emu/attention/math"],
    ["emu/attention/recipe", "emu/attention/inputs", "emu/attention/softmax"],
    ["emu/attention/flash"],
    ["analysis/truth", "gpu/primitives", "gpu/host"],
    ["gpu/kernels/hopper"],
    ["gpu/kernels/hopper/fp8", "gpu/kernels/hopper/backward"],
    ["gpu/kernels", "gpu/probes"],
    ["analysis", "gpu"],
    ["api"],
    ["api/report"],
    ["cli"],
    ["cli/commands"],
    ["python/module"],
]
TOGETHER = {("gpu/primitives", "gpu/host"), ("gpu/host", "gpu/primitives")}
# Every source file under these folders belongs to a room.
LAYERED = {"lib", "emu", "gpu", "analysis", "api", "cli", "python"}
RANK = {room: rank for rank, rooms in enumerate(LAYERS) for room in rooms}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def room(path):
    """The room of a repository path (the deepest room that holds it), or None outside the
    layered source (tests, tools, ...) and in a folder no room names."""
    parts = path.split("/")
    for depth in range(len(parts) - 1, 0, -1):
        folder = "/".join(parts[:depth])
        if folder in RANK:
            return folder
    return None


def main():
    files = subprocess.run(["git", "ls-files", "*.cpp", "*.hpp", "*.cu", "*.cuh", "*.h"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split()
    bad = []
    for f in files:
        here = room(f)
        if here is None:
            if f.split("/")[0] in LAYERED:
                bad.append(f"{f}: in no room of LAYERS (a new folder takes its rank there)")
            continue
        with open(os.path.join(ROOT, f), errors="replace") as text:
            for number, line in enumerate(text, 1):
                m = INCLUDE.match(line)
                there = room(m.group(1)) if m else None
                if there is None or there == here or (here, there) in TOGETHER or RANK[there] < RANK[here]:
                    continue
                way = "up" if RANK[there] > RANK[here] else "sideways"
                bad.append(f"{f}:{number}: {here} includes {m.group(1)} ({there}): {way}")
    for line in bad:
        print(line)
    if bad:
        print(f"check_layers: {len(bad)} file(s) or include(s) against the layers (tests/repo/check_layers.py LAYERS)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

"""Every example in README.md and docs/*.md that shows `$ roundscope ...` in a text block runs as
written, from a folder that has the repository's tests/ and the dumps examples/toy_dump.py
writes, and prints what the page shows, line for line.

Examples that read dumps/ are the exception: their numbers come from a few steps of BF16
training, whose bits depend on the CPU's PyTorch kernels (its SIMD width included), so for them
the exit code, the number of lines and each line's first word (the tensor names, headers and
rules; a number as "a number") are compared.

Usage: test_doc_examples.py ROUNDSCOPE PYTHON   (PYTHON with torch, for examples/toy_dump.py)"""
import glob
import os
import re
import shlex
import subprocess
import sys
import tempfile

from cli_harness import check, finish

BINARY, PYTHON = sys.argv[1], sys.argv[2]
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
WORK = tempfile.mkdtemp(prefix="roundscope-docs-")
os.symlink(os.path.join(ROOT, "tests"), os.path.join(WORK, "tests"))
made = subprocess.run([PYTHON, os.path.join(ROOT, "examples", "toy_dump.py"), "dumps"], cwd=WORK,
                      capture_output=True, text=True)
check("examples/toy_dump.py runs", made.returncode == 0, made.stderr[-600:])


def examples(path):
    """(command, expected output) for each ```text block whose first line is `$ roundscope ...`."""
    text = open(path).read()
    for block in re.findall(r"```text\n(.*?)```", text, flags=re.S):
        lines = block.rstrip("\n").split("\n")
        if lines[0].startswith("$ roundscope "):
            yield lines[0][2:], lines[1:]


def lead(line):
    """A line's first word, or "a number" for one that is a count or a value."""
    words = line.split()[:1]
    return ["a number"] if words and re.fullmatch(r"[-+]?[0-9][0-9.e+-]*%?", words[0]) else words


count = 0
for page in [os.path.join(ROOT, "README.md"), *sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))]:
    for command, expected in examples(page):
        count += 1
        name = f"{os.path.relpath(page, ROOT)}: {command}"
        args = shlex.split(command)
        p = subprocess.run([BINARY, *args[1:]], cwd=WORK, capture_output=True, text=True, timeout=600)
        got = p.stdout.rstrip("\n").split("\n")
        check(f"{name}: exit 0", p.returncode == 0, p.stderr.strip()[:400])
        if any(a.startswith("dumps/") for a in args):
            check(f"{name}: {len(expected)} lines", len(got) == len(expected), "\n".join(got))
            for i, (e, g) in enumerate(zip(expected, got)):
                check(f"{name}: line {i + 1} begins as shown", lead(e) == lead(g), f"{g!r} vs {e!r}")
        else:
            diff = [f"line {i + 1}: page {e!r}\n        got  {g!r}" for i, (e, g) in enumerate(zip(expected, got)) if e != g]
            check(f"{name}: output as shown", got == expected and not diff,
                  "\n".join(diff[:5]) or f"{len(got)} lines, page has {len(expected)}")
check("the pages hold examples", count >= 5, f"{count} found")
print(f"{count} examples")
finish("test_doc_examples.py")

"""Every example in README.md and docs/*.md that shows `$ roundscope ...` in a text block runs as
written, from a folder that has the repository's tests/ and the dumps examples/toy_dump.py
writes, and prints what the page shows, line for line (`roundscope demo`, the README's, is run
and compared by test_demo.py, which checks its files too).

Examples that read dumps/ are the exception: their numbers come from a few steps of BF16
training, whose bits depend on the CPU's PyTorch kernels (its SIMD width and AMX included), so for
them the exit code and each shown line's first word (the tensor names, headers and rules; a number
as "a number") are compared, the shown lines as the start of the output: where the CPU's kernels
are not the ones a page's fit found (torch-cpu-bf16 models ATen's AMX path), the fit prints where
its best recipe differs after them."""
import re
import shlex
import subprocess
import sys

import pytest

from conftest import ROOT
from doc_pages import shown_examples

EXAMPLES = [e for e in shown_examples() if e[1] != "roundscope demo"]


def lead(line):
    """A line's first word, or "a number" for one that is a count or a value."""
    words = line.split()[:1]
    return ["a number"] if words and re.fullmatch(r"[-+]?[0-9][0-9.e+-]*%?", words[0]) else words


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """A folder with the repository's tests/ and the dumps of examples/toy_dump.py."""
    folder = tmp_path_factory.mktemp("docs")
    (folder / "tests").symlink_to(ROOT / "tests")
    made = subprocess.run([sys.executable, ROOT / "examples" / "toy_dump.py", "dumps"], cwd=folder,
                          capture_output=True, text=True)
    assert made.returncode == 0, made.stderr[-600:]
    return folder


def test_the_pages_hold_examples():
    assert len(EXAMPLES) >= 5, EXAMPLES


@pytest.mark.parametrize("page, command, expected", EXAMPLES, ids=[f"{p}: {c}" for p, c, _ in EXAMPLES])
def test_an_example_prints_what_its_page_shows(cli, work, page, command, expected):
    args = shlex.split(command)
    p = cli.run(*args[1:], cwd=work, check=False, timeout=600)
    assert p.returncode == 0, p.stderr.strip()[:400]
    got = p.stdout.rstrip("\n").split("\n")
    if any(a.startswith("dumps/") for a in args):
        assert len(got) >= len(expected), "\n".join(got)
        assert [lead(g) for g in got[:len(expected)]] == [lead(e) for e in expected], "\n".join(got)
    else:
        assert got == expected

"""The examples the documentation shows: each ```text block of README.md and docs/*.md whose first
line is `$ roundscope ...`, with the output printed below it."""
import re

from conftest import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def shown_examples():
    """(page relative to the repository, command, expected output lines) for every example."""
    for page in PAGES:
        for block in re.findall(r"```text\n(.*?)```", page.read_text(), flags=re.S):
            lines = block.rstrip("\n").split("\n")
            if lines[0].startswith("$ roundscope "):
                yield page.relative_to(ROOT), lines[0][2:], lines[1:]

"""The figures the docs quote in more than one place agree: each quantity below is found, by a
pattern of its own in each file that quotes it, at least twice in all, and every occurrence gives
the same value (numbers compared at the coarser of the two precisions, so 0.08 agrees with
0.080 and 17 with 17.15, not 0.09 with 0.080). A figure measured again and changed in one place
only fails here; so does a quote reworded until its pattern no longer finds it (each pattern
must match), which is when this table is mended with it.

Usage: check_figures.py [REPO]   (exit 1 and one line per disagreement)"""
import os
import re
import sys
from decimal import Decimal

N = r"(\d+(?:\.\d+)?)"  # a number (not the full stop after it)
FOUR = r"([+\d.e-]+, [+\d.e-]+, [+\d.e-]+ and [+\d.e-]+)"  # four figures, as text
# name: [(file, pattern whose group 1 is the value)]
QUANTITIES = {
    "H100 crosscheck cases, all bit-exact": [
        ("README.md", r"matched the emulator in all (\d+) crosscheck cases"),
        ("docs/verification.md", r"\| all (\d+) crosscheck cases"),
    ],
    "the fast loop's time on two cores": [
        ("README.md", r"-LE \"exhaustive\|slow\"` \((\d+ min \d+ s) on two cores"),
        ("docs/verification.md", r"the `slow` ones \| (\d+ min \d+ s) on 2 cores"),
    ],
    "SmolLM2 heads in the P-collapse run": [
        ("docs/findings.md", r"backward, (\d+) heads in all:"),
        ("docs/findings.md", r"the two remedies together leave underflow on \d+ of the (\d+)\s+heads"),
        ("docs/findings.md", r"It leaves\s+none on \d+ of the (\d+) heads"),
    ],
    "SmolLM2 P-collapse, forward S = 1, mean underflow (fa3-fp8)": [
        ("docs/findings.md", r"\| forward, S = 1 \| ([\d.]+) \(0\.\d+, [\d.]+\) \| 0\.\d+ \(0\.\d+\) \|"),
        ("docs/findings.md", r"that leaves 0\.\d+ of the ([\d.]+), so\s+the sink"),
        ("docs/findings.md", r"\| forward, S = 1 \| 0\.\d+ \([\d., ]+\) \| ([\d.]+) \([\d., ]+\) \| 0\.\d+ \|"),
    ],
    "SmolLM2 P-collapse, the normal model's largest miss": [
        ("docs/findings.md", r"heavy-tailed rows the normal model misses by up to " + N),
        ("docs/findings.md", r"\| forward, S = 1 \| [^|]+\| [^|]+\| ([\d.]+) \(\d+\) \|"),
        ("docs/cli.md", r"on SmolLM2-135M the normal model misses by up to " + N),
    ],
    "SmolLM2 P-collapse, held scores counted, largest difference": [
        ("docs/findings.md", r"not a prediction\) differs by at most ([\d.]+)"),
        ("docs/findings.md", r"\| reverse, S = 256 \| [^|]+\| [^|]+\| [\d.]+ \(\d+\) \| ([\d.]+) \|"),
        ("docs/findings.md", r"threshold \(within ([\d.]+) on every head and run\)"),
    ],
    "SmolLM2 closed form, strong-sink heads, median miss (forward, S = 1)": [
        ("docs/findings.md", r"closed form per head is off by a median ([\d.]+) \(max [\d.]+\) on heads with sink"),
        ("docs/findings.md", r"In forward order with S = 1 it is off by a median\s+([\d.]+) \(max"),
    ],
    "seed's set-up, reverse order's MSE gain, strong-sink heads (S = 1, median)": [
        ("docs/findings.md", r"reverse order lowers O's MSE a median " + N + "x"),
        ("docs/findings.md", r"reverse order lowers the\s+MSE a median " + N + r" times at S = 1"),
    ],
    "seed's set-up, heads without a sink where reverse order raises the MSE": [
        ("docs/findings.md", r"but raises it on (\d+) of the \d+ heads with sink mass under 0\.1"),
        ("docs/findings.md", r"reverse order raises the MSE\s+on (\d+) of them"),
    ],
    "FlashAttention-3's FP8 recipe as it runs: non-sink P at zero (mean)": [
        ("docs/findings.md", r"inside exp2 is that S = 256\) ([\d.]+) % of the non-sink P"),
        ("docs/findings.md", r"FlashAttention-3 as it runs leaves ([\d.]+) % of the non-sink P at zero"),
    ],
    "compiled, delta from a float32 O: the residue over 8 steps at G = 14, 16, 18, 20": [
        ("docs/findings.md", r"8 of 8 steps positive at G = 14 to 20; " + FOUR + " over"),
        ("docs/findings.md", r"positive in 8 of 8 steps at G = 14 to 20,\s+" + FOUR + " over"),
    ],
    "SmolLM2 bias run: head-steps": [
        ("docs/findings.md", r"under the compiled code \(([\d,]+) head-steps"),
        ("docs/findings.md", r"15 steps, ([\d,]+)\s+head-steps"),
        ("docs/findings.md", r"keeps no sign: positive in [\d,]+ of the ([\d,]+)"),
    ],
    "SmolLM2 bias run: rows with a single dominant key": [
        ("docs/findings.md", r"a single dominant key does \(([\d,]+) rows"),
        ("docs/findings.md", r"\(the single dominant key\): ([\d,]+) rows"),
    ],
    "compiled bias at N = 1,024, G = 12": [
        ("docs/findings.md", r"\(N = 1,024: ([+-][\d.]+) at G = 12"),
        ("docs/findings.md", r"eager code's again \(([+-][\d.]+) against"),
    ],
    "compiled bias, single dominant key, G = 12": [
        ("docs/findings.md", r"a single dominant key's is one-signed \(([+-][\d.]+) at G = 12\)"),
        ("docs/findings.md", r"single dominant key now leaves a one-signed bias \(([+-][\d.]+) at G = 12"),
    ],
    "forced training run: positive batches of 1700": [
        ("docs/findings.md", r"a weak lean, (\d+) of 1700 batches positive"),
        ("docs/findings.md", r"\| no fix \| 0\.0 / 0\.1 \| [^|]+\| 0 \| [^|]+\| (\d+)/\d+, "),
    ],
}


def value(text: str) -> Decimal:
    return Decimal(text.replace(",", ""))


def agree(values: list[str]) -> bool:
    """Equal, numbers at the coarser precision (0.08 == 0.080, 17 == 17.15), else as text."""
    try:
        numbers = [value(v) for v in values]
    except ArithmeticError:
        return len(set(values)) == 1
    coarsest = max(n.as_tuple().exponent for n in numbers)
    return len({n.quantize(Decimal(1).scaleb(coarsest)) if n.as_tuple().exponent < coarsest else n
                for n in numbers}) == 1


def check(read) -> list[str]:
    """One line per quantity whose quotes disagree or whose pattern finds nothing; `read`
    gives a file's text."""
    problems = []
    for name, places in QUANTITIES.items():
        found = []  # (file:line, value)
        for path, pattern in places:
            text = read(path)
            hits = [(f"{path}:{text.count(chr(10), 0, m.start()) + 1}", m.group(1))
                    for m in re.finditer(pattern, text)]
            if not hits:
                problems.append(f"{name}: {path} no longer quotes it (pattern {pattern!r})")
            found += hits
        if len(found) < 2:
            problems.append(f"{name}: quoted {len(found)} time(s); the table is for figures quoted twice or more")
        elif not agree([v for _, v in found]):
            problems.append(f"{name}: " + ", ".join(f"{where} says {v}" for where, v in found))
    return problems


def main() -> int:
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", ".."))

    def read(path):
        with open(os.path.join(root, path), encoding="utf-8") as f:
            return f.read()
    problems = check(read)
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

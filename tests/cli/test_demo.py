"""`roundscope demo`, the README's main job: it prints what the README shows, line for line, and
writes demo.json with every pass and four plots (matplotlib is installed by tools/setup.sh)."""
import json

import pytest

from doc_pages import shown_examples


@pytest.fixture(scope="module")
def demo(cli, tmp_path_factory):
    """The demo run as the README runs it, from a fresh folder: (standard output, its folder)."""
    work = tmp_path_factory.mktemp("demo")
    return cli.run("demo", cwd=work).stdout, work / "roundscope-demo"


def test_the_demo_prints_what_the_readme_shows(demo):
    shown = [lines for page, command, lines in shown_examples()
             if str(page) == "README.md" and command == "roundscope demo"]
    assert len(shown) == 1, "the README shows the demo once"
    assert demo[0].rstrip("\n").split("\n") == shown[0]


def test_the_demo_prints_the_four_failures(demo):
    stdout, _ = demo
    assert all(s in stdout for s in ("P-collapse", "rounding bias", "leakage", "overflow")), stdout


def test_the_demo_json_holds_every_pass(demo):
    _, out = demo
    report = json.loads((out / "demo.json").read_text())
    assert set(report) == {"pcollapse", "bias", "leak", "headroom"}
    regimes = report["bias"]["regimes"]
    dominated = [sum(s["tie_dominated_rows"] for s in r["steps"]) / sum(s["rows"] for s in r["steps"]) for r in regimes]
    assert len(regimes) == 2 and regimes[0]["tie_gap"] < regimes[1]["tie_gap"]
    assert dominated[0] < 0.01 and dominated[1] > 0.5, "the bias outside and inside the tie regime"
    assert regimes[1]["positive_steps"] == len(regimes[1]["steps"])
    assert abs(regimes[1]["cumulative_coefficient"][-1]) > 10 * abs(regimes[0]["cumulative_coefficient"][-1])
    assert report["leak"]["with_fix"]["leaking_pairs"] == 0 and report["leak"]["without_fix"]["leaking_pairs"] > 0


def test_the_demo_draws_four_plots(demo):
    stdout, out = demo
    assert "plots:" in stdout, stdout
    assert all((out / f"{p}.png").stat().st_size > 1000 for p in ("pcollapse", "bias", "leak", "headroom"))

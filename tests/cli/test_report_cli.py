"""`roundscope report`: four dumps (2 layers x 2 steps, 2 heads, causal, a sink) analysed head by
head; each head's P-collapse equals `roundscope pcollapse` on the file; the bias is summed over
steps per layer and head; a re-run takes everything from the cache and writes the same report;
1 and 2 threads give the same results; a changed file is recomputed alone; --list-tasks and
--run-task give what the cache holds; shards gathered give the unsharded report.json byte for
byte; the HTML is self-contained and its Plotly charts draw in headless Chromium (tools/setup.sh
installs it) without an error; TensorBoard's own reader reads the exported scalars and
histograms back; bad input gets one line and exit 2 before anything is written."""
import html
import json
import os
import pty
import random
import re
import shutil
import signal
import struct
import subprocess
import sys

import pytest

from files_by_hand import read_safetensors, write_safetensors
from signal_at_temp import build_shim, runs_stopped_at_each_temporary

H, N, D = 2, 64, 16
TASKS = 4 * H  # a task per head (a file's compare gathered from its heads')
KEYS = ("files", "heads", "compare", "bias_over_steps")


def tensors(seed):
    r = random.Random(seed)
    q = [r.gauss(0, 1) for _ in range(H * N * D)]
    k = [r.gauss(0, 1) for _ in range(H * N * D)]
    for h in range(H):  # key 0 is a sink: feature 0 is 3 in every query and 8 in key 0
        for i in range(N):
            q[(h * N + i) * D] = 3.0
            k[(h * N + i) * D] = 8.0 if i == 0 else 0.0

    def pack(xs):
        return struct.pack(f"<{len(xs)}f", *xs)

    return {"q": ("F32", [H, N, D], pack(q)), "k": ("F32", [H, N, D], pack(k)),
            "v": ("F32", [H, N, D], pack([r.gauss(-0.3, 1) for _ in range(H * N * D)])),
            "do": ("F32", [H, N, D], pack([r.gauss(-0.3, 1) for _ in range(H * N * D)]))}


@pytest.fixture(scope="module")
def dumps(cli, tmp_path_factory):
    """Four dumps: inputs plus o as a BF16 kernel would write it (the fa2-bf16 emulation)."""
    work = tmp_path_factory.mktemp("report")
    folder = work / "dumps"
    folder.mkdir()
    for layer in (0, 1):
        for step in (0, 10):
            t = tensors(10 * layer + step)
            write_safetensors(work / "raw.safetensors", t, {"causal": "true"})
            cli.run("attention", work / "raw.safetensors", "--recipe", "fa2-bf16", "-o", work / "o.safetensors")
            t["o"] = read_safetensors(work / "o.safetensors")[0]["o"]
            write_safetensors(folder / f"step{step}_layer{layer}.safetensors", t,
                              {"causal": "true", "layer": str(layer), "step": str(step)})
    return folder


def report(cli, dumps, out, *extra, timeout=900):
    p = cli.run("report", dumps, "-o", out, "--recipe", "fa2-bf16", "--json", *extra, timeout=timeout)
    return json.loads(p.stdout), p.stderr


def load(out):
    """report.json with its layer files' results joined in (heads, compare)."""
    r = json.loads((out / "report.json").read_text())
    r["heads"], r["compare"] = [], []
    for layer in r["layers"]:
        content = json.loads((out / layer["file"]).read_text())
        assert content["layer"] == layer["layer"] and len(content["heads"]) == layer["heads"]
        r["heads"] += content["heads"]
        r["compare"] += content["compare"]
    return r


def output_bytes(out):
    """report.json and every layer file, as bytes."""
    return {p.relative_to(out): p.read_bytes() for p in [out / "report.json", *sorted((out / "layers").glob("*"))]}


@pytest.fixture(scope="module")
def first(cli, dumps, tmp_path_factory):
    """The first run's summary, standard error, report.json and folder."""
    out = tmp_path_factory.mktemp("first") / "report"
    summary, err = report(cli, dumps, out, "--threads", "2")
    return summary, err, load(out), out


def test_the_report_covers_every_file_and_head(first):
    summary, err, r, _ = first
    assert summary["tasks"] == TASKS and summary["cached"] == 0, summary
    # off a terminal no bar: a line every 10 seconds (none in a run this short) and one at the end
    lines = err.splitlines()
    assert "\r" not in err and lines[-1].startswith(f"report: {TASKS}/{TASKS} tasks, "), err
    assert lines[-1].endswith(" left") and " tasks/s, " in lines[-1], err
    assert len(r["files"]) == 4 and len(r["heads"]) == 4 * H and len(r["compare"]) == 4


def test_a_layer_a_file_and_a_summary(first, cli, dumps, tmp_path):
    """report.json is the summary (no head's results: at a model's scale it stays small); each
    layer's results are in layers/layerL.json; a layer an earlier report had is removed."""
    out = first[3]
    summary = json.loads((out / "report.json").read_text())
    assert "heads" not in summary and "compare" not in summary
    assert [(x["layer"], x["file"], x["heads"], x["compare"]) for x in summary["layers"]] == [
        (0, "layers/layer0.json", 2 * H, 2), (1, "layers/layer1.json", 2 * H, 2)]
    one = tmp_path / "one_layer"
    one.mkdir()
    shutil.copy(dumps / "step0_layer1.safetensors", one)
    copy = tmp_path / "report"
    shutil.copytree(out, copy)
    report(cli, one, copy)
    assert sorted(p.name for p in (copy / "layers").iterdir()) == [".roundscope-layers", "layer1.json"]


def test_each_heads_pcollapse_is_pcollapses_on_the_file(cli, dumps, first):
    r = first[2]
    for f in sorted(dumps.iterdir()):
        whole = cli.json("pcollapse", f, "--recipe", "fa3-fp8", "--k-sink", "1")
        for h in whole["heads"]:
            mine = [x for x in r["heads"] if x["file"] == f.name and x["head"] == h["head"]]
            assert len(mine) == 1, (f.name, h["head"])
            assert [(a["underflow_fraction"], a["predicted_fraction"]) for a in mine[0]["pcollapse"]["runs"]] == \
                [(b["underflow_fraction"], b["predicted_fraction"]) for b in h["runs"]]
            assert mine[0]["pcollapse"]["effective_sink_strength"] == h["effective_sink_strength"]


def test_every_head_has_every_analysis(first):
    r = first[2]
    assert all(x["pcollapse"]["sink_mass"] > 0.2 for x in r["heads"]), "the sink is seen"
    assert all({"leak", "headroom", "bias", "attribute"} <= set(x) for x in r["heads"])
    assert all(c["compare"]["fa2-bf16"]["outputs"]["o"]["matched"] == H * N * D for c in r["compare"]), \
        "the kernel's o is the fa2-bf16 emulation's bit for bit"
    for x in r["heads"]:
        # the dumps' o is fa2-bf16's own: the kernel's delta error is the emulation's; the max
        # adjustment is a different kernel, emulated (the dump's O is not the fixed kernel's)
        b = x["bias"]
        assert b["kernel"]["coefficient_sum"] == b["emulated"]["coefficient_sum"], b
        assert b["kernel"]["o_from_file"] and not b["emulated"]["o_from_file"] and not b["max_adjust"]["o_from_file"]


def test_attribution_stage_by_stage_on_request(cli, dumps, first, tmp_path):
    """By default each recipe's error with every stage low and every stage exact (two runs);
    --attribute-stages adds each stage alone, the same two figures beside them."""
    one = tmp_path / "one"
    one.mkdir()
    shutil.copy(dumps / "step0_layer0.safetensors", one)
    report(cli, one, tmp_path / "staged", "--attribute-stages", "--no-html")
    staged = load(tmp_path / "staged")
    assert staged["options"]["attribute_stages"] is True and first[2]["options"]["attribute_stages"] is False
    for h in staged["heads"]:
        a = h["attribute"]["fa2-bf16"]
        same = next(x for x in first[2]["heads"] if x["file"] == h["file"] and x["head"] == h["head"])
        b = same["attribute"]["fa2-bf16"]
        assert [s["stage"] for s in a["stages"]] == ["score product", "P cast", "P V product", "O cast"], a
        assert b["stages"] == [] and (a["all_low"], a["all_exact"], a["delta_recipe"]) == \
            (b["all_low"], b["all_exact"], b["delta_recipe"])


def test_the_bias_over_steps_per_layer_and_head(first):
    r = first[2]
    series = r["bias_over_steps"]
    assert sorted((s["layer"], s["head"]) for s in series) == [(layer, h) for layer in (0, 1) for h in range(H)]
    for s in series:
        by_step = {x["step"]: x["bias"]["kernel"]["coefficient_sum"] for x in r["heads"]
                   if x["layer"] == s["layer"] and x["head"] == s["head"]}
        assert s["steps"] == [0, 10] and s["coefficient_sum"] == [by_step[0], by_step[10]]
        assert s["cumulative"] == [by_step[0], by_step[0] + by_step[10]]
        pos, neg = sum(c > 0 for c in s["coefficient_sum"]), sum(c < 0 for c in s["coefficient_sum"])
        # two steps: one sign both times gives p = 1/2, split signs p = 1 (the exact two-sided sign test)
        want_p = 1.0 if pos + neg == 0 or min(pos, neg) == 1 else 2 * 0.5 ** (pos + neg)
        assert s["positive_steps"] == pos and s["negative_steps"] == neg
        assert abs(s["sign_test_p"] - min(1.0, want_p)) < 1e-12, s


def test_a_progress_bar_on_a_terminal(cli, dumps, tmp_path):
    master, slave = pty.openpty()
    p = subprocess.run([cli.path, "report", dumps, "-o", tmp_path / "report", "--recipe", "fa2-bf16"],
                       stdout=subprocess.DEVNULL, stderr=slave, timeout=600)
    os.close(slave)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    assert p.returncode == 0 and b"\r[" in seen and f"{TASKS}/{TASKS} tasks, ".encode() in seen, seen[-300:]
    assert b" tasks/s, " in seen and b" left" in seen, "the rate and the time left"


def test_a_rerun_takes_every_task_from_the_cache(cli, dumps, first):
    r, out = first[2], first[3]
    again, _ = report(cli, dumps, out)
    assert again["cached"] == again["tasks"], again
    assert load(out) == r, "the same report, nothing in it about the run"


def test_one_thread_gives_the_bits_of_two(cli, dumps, first, tmp_path):
    report(cli, dumps, tmp_path / "report", "--threads", "1")
    assert all(load(tmp_path / "report")[k] == first[2][k] for k in ("heads", "compare", "bias_over_steps"))


@pytest.mark.slow  # several seconds: the full suite runs it, the fast loop does not
def test_a_changed_file_is_recomputed_alone(cli, dumps, tmp_path):
    copy = tmp_path / "dumps"
    shutil.copytree(dumps, copy)
    report(cli, copy, tmp_path / "report")
    changed = tensors(99)
    changed["o"] = ("BF16", [H, N, D], b"\0\0" * (H * N * D))
    write_safetensors(copy / "step0_layer0.safetensors", changed, {"causal": "true", "layer": "0", "step": "0"})
    third, _ = report(cli, copy, tmp_path / "report")
    assert third["cached"] == third["tasks"] - H, third
    assert load(tmp_path / "report")["compare"][0]["compare"]["fa2-bf16"]["matched"] < H * N * D, "its o of zeros"


@pytest.mark.slow  # several seconds: the full suite runs it, the fast loop does not
def test_a_cache_that_cannot_lie(cli, dumps, first, tmp_path):
    """Entries truncated, edited, swapped, emptied, and a FIFO and a folder in their place: each
    is recomputed and counted, never believed (nor opened: a FIFO would hang the reader)."""
    out = tmp_path / "report"
    shutil.copytree(first[3], out)
    heads = [p for p in sorted((out / "cache").glob("*.json")) if '"headroom"' in p.read_text()]
    truncated, edited, swapped, emptied, fifo, folder = heads[:6]
    truncated.write_text(truncated.read_text()[:100])
    j = json.loads(edited.read_text())
    j["headroom"]["rows_total"] += 1
    edited.write_text(json.dumps(j))
    swapped.write_text(heads[6].read_text())  # another head's result under this key
    emptied.write_text("{}")
    fifo.unlink()
    os.mkfifo(fifo)
    folder.unlink()
    folder.mkdir()
    summary, _ = report(cli, dumps, out, timeout=300)
    assert summary["recomputed"] == 6 and summary["cached"] == summary["tasks"] - 6, summary
    assert all(load(out)[k] == first[2][k] for k in KEYS)
    assert fifo.is_file() and folder.is_file(), "replaced by their results"
    again, _ = report(cli, dumps, out)
    assert again["recomputed"] == 0 and again["cached"] == again["tasks"], again


def test_what_would_be_merged_or_dropped_is_refused_or_found(cli, dumps, tmp_path):
    """Two dumps of one layer and step are an error naming both; `-o .` over a subfolder of dumps
    finds them all; a sink that leaves no key is refused as pcollapse refuses it."""
    twin = tmp_path / "twin"
    shutil.copytree(dumps, twin)
    shutil.copy(twin / "step0_layer1.safetensors", twin / "copy_of_step0_layer1.safetensors")
    message = cli.error("report", twin, "-o", tmp_path / "r1")
    assert "copy_of_step0_layer1.safetensors" in message and "step0_layer1.safetensors and" in message, message
    work = tmp_path / "work"
    shutil.copytree(dumps, work / "dumps" / "sub")
    p = cli.run("report", "dumps", "-o", ".", "--recipe", "fa2-bf16", "--json", cwd=work)
    assert json.loads(p.stdout)["files"] == 4
    assert "--k-sink" in cli.error("report", dumps, "-o", tmp_path / "r2", "--k-sink", "1000")


def test_an_engines_task_reads_its_own_file_and_its_own_content(cli, dumps, tmp_path):
    """--run-task with --task-file reads that file alone (a corrupt neighbour is not read), and a
    file rewritten since --list-tasks has no such task."""
    copy = tmp_path / "dumps"
    shutil.copytree(dumps, copy)
    tasks = cli.json("report", copy, "-o", tmp_path / "r", "--recipe", "fa2-bf16", "--list-tasks")["tasks"]
    (copy / "corrupt.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json")
    t = tasks[0]
    ran = cli.json("report", copy, "-o", tmp_path / "r", "--recipe", "fa2-bf16", "--run-task", t["key"],
                   "--task-file", t["file"])
    assert ran["task"] == t["key"] and ran["head"] == 0
    write_safetensors(t["file"], tensors(77), {"causal": "true", "layer": "0", "step": "0"})
    message = cli.error("report", copy, "-o", tmp_path / "r", "--recipe", "fa2-bf16", "--run-task", t["key"],
                        "--task-file", t["file"])
    assert "no task" in message and "as it is now" in message, message


def test_the_tasks_of_a_distributed_engine(cli, dumps, first):
    out = first[3]
    tasks = cli.json("report", dumps, "-o", out, "--recipe", "fa2-bf16", "--list-tasks")["tasks"]
    assert len(tasks) == TASKS
    ran = cli.json("report", dumps, "-o", out, "--recipe", "fa2-bf16", "--run-task", tasks[1]["key"])
    assert ran == json.loads((out / "cache" / (tasks[1]["key"] + ".json")).read_text()), "what the cache holds"


def test_shards_gathered_give_the_same_report_byte_for_byte(cli, dumps, first, tmp_path):
    out = tmp_path / "report"
    done = [report(cli, dumps, out, "--shard", f"{i}/3")[0] for i in (1, 2, 3)]
    assert [d["shard"] for d in done] == ["1/3", "2/3", "3/3"] and sum(d["tasks"] for d in done) == TASKS, done
    assert all(d["all_tasks"] == TASKS and d["cached"] == 0 for d in done), done
    assert not (out / "report.json").exists(), "a shard writes its tasks' results only"
    again = report(cli, dumps, out, "--shard", "2/3")[0]
    assert again["cached"] == again["tasks"] == done[1]["tasks"], again
    gathered, _ = report(cli, dumps, out, "--threads", "1")
    assert gathered["cached"] == TASKS, "the gathering run computes nothing"
    assert output_bytes(out) == output_bytes(first[3])


def without_task_keys(out):
    """The layer files' results without what names the task (its key and digest cover the options)."""
    r = load(out)
    for h in r["heads"]:
        h.pop("task"), h.pop("digest")
    return r["heads"], r["compare"]


@pytest.mark.slow  # several seconds: the full suite runs it, the fast loop does not
def test_row_sampling_with_its_sampling_errors(cli, dumps, first, tmp_path):
    """--rows K: each head's analyses on K of its rows, drawn from --seed, each figure with its
    sampling error from random groups (the file's compare too); K past a head's rows runs it
    whole; the same seed gives the same bytes, sharded or not; another seed another sample."""
    out = tmp_path / "sampled"
    summary, _ = report(cli, dumps, out, "--rows", "32", "--seed", "5")
    assert summary["tasks"] == TASKS
    r = load(out)
    assert r["options"]["rows"] == 32 and r["options"]["seed"] == 5
    for h in r["heads"]:
        assert h["sample"] == {"rows": 32, "of": N, "groups": 2, "seed": 5}, h["sample"]
        e = h["sampling_error"]
        for run in e["pcollapse"]["runs"]:
            assert run["underflow_fraction"] is None or run["underflow_fraction"] >= 0
        assert e["attribute"]["fa2-bf16"]["all_low"] > 0
        assert "compare" not in e, "a head's compare goes to its file's"
        # counted P entries: a total over the sampled rows, fewer than the whole head's
        whole = next(x for x in first[2]["heads"] if x["file"] == h["file"] and x["head"] == h["head"])
        assert h["pcollapse"]["runs"][0]["counted"] < whole["pcollapse"]["runs"][0]["counted"]
        assert h["leak"] == whole["leak"], "leakage runs on the head's first tokens as always"
    for c in r["compare"]:
        o = c["compare"]["fa2-bf16"]["outputs"]["o"]
        assert o["total"] == H * 32 * D and o["matched"] == o["total"], "the emulation is the kernel, row by row"
        assert c["sampling_error"]["fa2-bf16"]["outputs"]["o"]["rel_rms"] > 0
        assert all(w["index"][1] < N for w in o["worst"]), "indices are the file's"
    page = (out / "report.html").read_text()
    assert "Sampled:" in page and page.count('class="se"') > 10

    again = tmp_path / "again"
    for i in (1, 2):
        report(cli, dumps, again, "--rows", "32", "--seed", "5", "--shard", f"{i}/2")
    report(cli, dumps, again, "--rows", "32", "--seed", "5", "--threads", "1")
    assert output_bytes(again) == output_bytes(out)
    other = tmp_path / "other"
    report(cli, dumps, other, "--rows", "32", "--seed", "6")
    assert load(other)["heads"][0]["pcollapse"] != r["heads"][0]["pcollapse"]
    whole = tmp_path / "whole"
    report(cli, dumps, whole, "--rows", str(N))
    assert without_task_keys(whole) == without_task_keys(first[3]), "K >= N: every row, the same figures"


def chromium(*arguments, timeout=180):
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    assert browser is not None, "headless Chromium is installed (tools/setup.sh)"
    return subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           "--virtual-time-budget=30000", *map(str, arguments)],
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow  # several seconds: the full suite runs it, the fast loop does not
def test_the_page_loads_only_its_library_beside_it_and_its_charts_draw(first, tmp_path):
    page = first[3] / "report.html"
    text = page.read_text()
    loads = re.findall(r"<(script|link|img|iframe)\b[^>]*\b(?:src|href)=\"([^\"]*)\"", text)
    assert not loads, "nothing loaded by the markup: the page's script loads Plotly after the first screen"
    library = re.findall(r'<body[^>]* data-plotly="([^"]*)"', text)
    assert len(library) == 1 and re.fullmatch(r"plotly-[\d.]+\.min\.js", library[0]), library
    assert (page.parent / library[0]).stat().st_size > 3e6 and len(text) < 1e6, "the library beside the page"
    assert "layer by head (mean over steps" in text, "a heat map per analysis: two layers, two heads"
    assert "Plotly.newPlot" in text and "What to look at first" in text and "<table" in text
    # As a reader opens it: the first screen drawn (its heat maps are the page's own tables of
    # coloured cells, each cell opening a head's view), no error met on the page, no console error.
    p = chromium("--dump-dom", "--enable-logging=stderr", "--v=0", "--window-size=1280,1000", f"file://{page}")
    assert p.returncode == 0, p.stderr[-500:]
    body = re.search(r"<body([^>]*)>", p.stdout).group(1)
    assert "data-errors" not in body and re.search(r'data-screen-ms="\d+"', body), body
    heats = re.findall(r'<table class="heat">(.*?)</table>', p.stdout, re.S)
    assert len(heats) == text.count('class="heat"'), "every heat map drawn"
    rows = set(re.findall(r'<tr id="(h-[^"]+)"', text))
    for heat in heats:
        cells = [dict(re.findall(r'([a-z-]+)="([^"]*)"', c)) for c in re.findall(r"<td([^>]*)>", heat)]
        assert cells and all(re.fullmatch(r"background: rgb\(\d+, \d+, \d+\);", c["style"])
                             and re.fullmatch(r"layer \d+ head \d+: \S+", c["title"]) for c in cells), heat[:300]
        assert {c["data-view"] for c in cells} <= rows, "each cell opens a head's view"
    console = [line for line in p.stderr.splitlines() if "CONSOLE" in line and "ERROR" in line.upper()]
    assert not console, console
    # Every chart drawn by Plotly (?draw=all draws them all at once, as printing does), with steps
    # in the table in their numeric order (0 before 10), and heads that can be sorted.
    p = chromium("--dump-dom", "--enable-logging=stderr", "--v=0", f"file://{page}?draw=all")
    body = re.search(r"<body([^>]*)>", p.stdout).group(1)
    charts, drawn = (int(re.search(rf'data-{k}="(\d+)"', body).group(1)) for k in ("charts", "drawn"))
    assert charts >= 4 and drawn == charts and "data-errors" not in body, body
    assert p.stdout.count('class="main-svg"') >= charts, "Plotly's SVG in every chart"
    # The same on the wall clock, no virtual time (the tool docs/performance.md's timings come from)
    tool = os.path.join(os.path.dirname(__file__), "..", "..", "tools", "bench", "page_timing.py")
    p = subprocess.run([sys.executable, tool, str(page), "--runs", "1", "--all"], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0 and re.fullmatch(
        rf"run 1: paintMs \d+, screenMs \d+, plotlyMs \d+, drawMs \d+; charts {charts}/{charts}\n", p.stdout), p
    # The screenshot: the charts' colours are on it (the first series' Okabe-Ito blue), drawn as
    # they come near the screen.
    png = tmp_path / "report.png"
    p = chromium(f"--screenshot={png}", "--window-size=1280,2400", f"file://{page}")
    assert p.returncode == 0 and png.exists(), p.stderr[-500:]
    import matplotlib.image

    pixels = (matplotlib.image.imread(png)[..., :3] * 255).round().astype(int)
    blue = ((abs(pixels - [0, 114, 178]).sum(axis=-1)) < 40).sum()
    assert blue > 200, f"{blue} pixels of the charts' blue: nothing drawn"


@pytest.mark.slow  # several seconds: the full suite runs it, the fast loop does not
def test_a_head_named_on_the_first_screen_opens_its_own_view(first):
    """One click (here, the page's address ending in the link's target, as the click sets it):
    the head's every figure in one column, with its rank among the head-steps and its layer's
    median, read from its row of the table; an address naming no row opens nothing."""
    page = first[3] / "report.html"
    text = page.read_text()
    anchor = re.search(r'<h2 id="first">.*?href="#(h-[^"]+)"', text, re.S).group(1)
    row = re.search(rf'<tr id="{anchor}"[^>]*>(.*?)</tr>', text, re.S).group(1)
    labels = re.findall(r'<th title="([^"]*)">', text)
    p = chromium("--dump-dom", f"file://{page}#{anchor}")
    assert p.returncode == 0, p.stderr[-500:]
    body = re.search(r"<body([^>]*)>", p.stdout).group(1)
    assert f'data-view="{anchor}"' in body and "data-errors" not in body, body
    view = re.search(r'<aside id="head-view"([^>]*)>(.*?)</aside>', p.stdout, re.S)
    assert "hidden" not in view.group(1), view.group(1)
    figures, collapsing = view.group(2).split('<table id="head-view-rows">')
    cells = [html.unescape(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", figures, re.S)]
    heads = len(re.findall(r'<tr id="h-', text))
    # a row per figure: its label, the table's value, its rank, its layer's median
    assert len(cells) == 4 * len(labels), (len(cells), len(labels))
    values = [html.unescape(re.sub(r"<[^>]+>", "", c)) for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)[4:]]
    for i, label in enumerate(labels):
        assert cells[4 * i].startswith(html.unescape(label)), (cells[4 * i], label)
        assert cells[4 * i + 1] == values[i], (label, cells[4 * i + 1], values[i])
        assert cells[4 * i + 2] == "-" or re.fullmatch(rf"\d+ of {heads}", cells[4 * i + 2]), cells[4 * i + 2]
    assert f'<tr id="{anchor}" data-layer' in p.stdout and 'class="viewed"' in p.stdout
    # its profile, drawn: the head's pcollapse histograms and its sink mass by query position as
    # the report holds them, and its most collapsing rows, a row each
    for chart in ("head-view-gaps", "head-view-p", "head-view-sink"):
        assert re.search(rf'<div id="{chart}"[^>]*data-drawn="1"', p.stdout), chart
    profiles = json.loads(re.search(r'id="head-profiles">(.*?)</script>', text).group(1))
    where = tuple(int(x) for x in anchor.split("-")[1:])
    mine = [h["pcollapse"] for h in load(first[3])["heads"] if (h["layer"], h["head"], h["step"]) == where][0]
    profile, bins = profiles["heads"][anchor], profiles["bins"]
    assert [p + [0] * (bins - len(p)) for p in profile[:2]] == [mine["score_gap_histogram"], mine["p_binade_histogram"]]
    assert profiles["shared"][profile[3]] == [mine["position_bins"], ["forward", 1.0]]
    assert all(x is None and y in (None, "nan") or x == pytest.approx(y, rel=5e-3)
               for x, y in zip(profile[2], mine["sink_mass_by_position"]))
    body_rows = collapsing.split("<tbody>")[1].split("</table>")[0]
    rows = [re.findall(r"<td>([^<]*)</td>", r) for r in re.findall(r"<tr>(.*?)</tr>", body_rows)]
    assert mine["collapsing_rows"] and len(rows) == len(mine["collapsing_rows"]), (rows, mine["collapsing_rows"])
    for cells_of, r in zip(rows, mine["collapsing_rows"]):
        assert cells_of[:2] == [str(r["row"]), str(r["keys"])] and cells_of[2].startswith(f'{r["counted"]} ('), cells_of
    # and its element of O furthest from the truth, beside the recipe that matches most of its O
    compared = [h["compare_worst"] for h in load(first[3])["heads"] if (h["layer"], h["head"], h["step"]) == where][0]
    recipe = max(compared, key=lambda x: compared[x]["o"]["matched"])  # the first on a tie (dicts keep order)
    w = compared[recipe]["o"]["worst"][0]
    shown = re.findall(r"<td>([^<]*)</td>", re.search(r'<table id="head-view-worst">.*?<tbody>(.*?)</tbody>',
                                                      view.group(2), re.S).group(1))
    expected = [w["index"][-2], w["index"][-1], *(w[k] for k in ("kernel", "truth", "recipe")), w["ulp"]]
    assert [float(x) for x in shown] == expected, (shown, w)  # the same doubles (JS and Python write exponents apart)
    assert f"beside {recipe}, the recipe that matches" in html.unescape(view.group(2))
    p = chromium("--dump-dom", f"file://{page}#h-no-such-head")
    body = re.search(r"<body([^>]*)>", p.stdout).group(1)
    assert "data-view" not in body and re.search(r'<aside id="head-view" hidden', p.stdout), body


def test_bias_over_steps_sums_a_heads_batch_as_its_weight_gradient_does(cli, tmp_path):
    """In a dump of batch 2, heads 0 and 2 of the flat index are head 0 of the model: one series,
    their delta errors added (a head's weight gradient sums over the batch)."""
    folder = tmp_path / "batched"
    folder.mkdir()
    for step in (0, 1):
        a, b = tensors(100 + step), tensors(200 + step)
        t = {name: (a[name][0], [2, *a[name][1]], a[name][2] + b[name][2]) for name in a}
        write_safetensors(tmp_path / "raw.safetensors", t, {"causal": "true"})
        cli.run("attention", tmp_path / "raw.safetensors", "--recipe", "fa2-bf16", "-o", tmp_path / "o.safetensors")
        t["o"] = read_safetensors(tmp_path / "o.safetensors")[0]["o"]
        write_safetensors(folder / f"step{step}_layer0.safetensors", t,
                          {"causal": "true", "layer": "0", "step": str(step)})
    summary, _ = report(cli, folder, tmp_path / "r", "--no-html")
    r = load(tmp_path / "r")
    series = {s["head"]: s for s in r["bias_over_steps"]}
    assert sorted(series) == list(range(H)), "one series per model head, not per batch entry"
    for head in range(H):
        for i, step in enumerate((0, 1)):
            parts = [x["bias"]["kernel"]["coefficient_sum"] for x in r["heads"]
                     if x["step"] == step and x["head"] % H == head]
            assert len(parts) == 2 and series[head]["coefficient_sum"][i] == pytest.approx(sum(parts), rel=1e-12)


def test_tensorboard_reads_the_exported_figures(cli, dumps, first, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    logdir = tmp_path / "tb"
    summary, _ = report(cli, dumps, first[3], "--tensorboard", logdir, "--tensorboard-heads")
    assert summary["tensorboard"] == str(logdir) and summary["cached"] == TASKS
    # the run folder is named after the dumps' folder
    assert [p.name for p in logdir.iterdir()] == [dumps.name]
    events = EventAccumulator(str(logdir / dumps.name), size_guidance={"scalars": 0, "histograms": 0})
    events.Reload()
    r = first[2]
    fraction = {}
    for h in r["heads"]:
        run = next(x for x in h["pcollapse"]["runs"] if x["order"] == "forward" and x["scale"] == 1)
        got = {e.step: e.value for e in events.Scalars(f"pcollapse_fwd_s1/layer{h['layer']:02d}/head {h['head']}")}
        assert got[h["step"]] == struct.unpack("f", struct.pack("f", run["underflow_fraction"]))[0]
        fraction.setdefault((h["layer"], h["step"]), []).append(run["underflow_fraction"])
    for (layer, step), values in fraction.items():
        # per layer: the mean as the scalar, every head in the histogram
        got = {e.step: e.value for e in events.Scalars(f"pcollapse_fwd_s1/layer{layer:02d}")}
        assert got[step] == pytest.approx(sum(values) / len(values), rel=1e-6)
        heads = {e.step: e.histogram_value for e in events.Histograms(f"pcollapse_fwd_s1/layer{layer:02d}/heads")}
        assert heads[step].num == len(values) and heads[step].max == pytest.approx(max(values), rel=1e-6)
    assert [e.step for e in events.Scalars("sink_mass/layer01")] == [0, 10]
    ulps = events.Histograms("compare/fa2-bf16/o/ulps/layer00")
    assert [e.step for e in ulps] == [0, 10]
    o = next(c for c in r["compare"] if c["file"] == "step0_layer0.safetensors")["compare"]["fa2-bf16"]["outputs"]["o"]
    assert ulps[0].histogram_value.num == o["total"], "every value in the histogram"
    assert [e.step for e in events.Scalars("bias/cumulative/layer00/head 0")] == [0, 10]
    assert [e.step for e in events.Scalars("bias/cumulative/layer00")] == [0, 10]
    # every tag is METRIC/layerLL, with a head's or the heads' below it
    for tag in events.Tags()["scalars"] + events.Tags()["histograms"]:
        assert re.search(r"/layer\d\d(/heads|/head \d+)?$", tag), tag


def test_tensorboard_writes_per_layer_tags_by_default_into_a_named_run(cli, dumps, first, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    logdir = tmp_path / "tb"
    report(cli, dumps, first[3], "--tensorboard", logdir, "--tensorboard-run", "baseline")
    assert [p.name for p in logdir.iterdir()] == ["baseline"]
    tags = EventAccumulator(str(logdir / "baseline")).Reload().Tags()
    assert "sink_mass/layer00" in tags["scalars"] and "sink_mass/layer00/heads" in tags["histograms"]
    assert not [t for t in tags["scalars"] if "/head " in t], "per-head scalars only on request"
    for bad in ("..", "a/b", ".", "x\ty"):
        assert "--tensorboard-run" in cli.error("report", dumps, "-o", tmp_path / "r", "--tensorboard", logdir,
                                                "--tensorboard-run", bad), bad
    assert "--tensorboard-heads" in cli.error("report", dumps, "-o", tmp_path / "r", "--tensorboard-heads")
    assert "--tensorboard-run" in cli.error("report", dumps, "-o", tmp_path / "r", "--tensorboard-run", "x")
    assert not (tmp_path / "r").exists(), "before any work"


def test_bad_input_gets_one_line_before_anything_is_written(cli, dumps, tmp_path):
    bad = tmp_path / "bad"
    bad.mkdir()
    shutil.copy(dumps / "step10_layer0.safetensors", bad)
    (bad / "zcorrupt.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json")
    assert "zcorrupt.safetensors" in cli.error("report", bad, "-o", tmp_path / "bad_report")
    assert not (tmp_path / "bad_report").exists(), "before any work"
    assert "-o" in cli.error("report", dumps, "-o", dumps / "step10_layer0.safetensors")
    assert "-o" in cli.error("report", dumps, "-o", dumps)
    assert "no-such-recipe" in cli.error("report", dumps, "--recipe", "no-such-recipe", "-o", tmp_path / "x")
    (tmp_path / "empty").mkdir()
    assert "no .safetensors" in cli.error("report", tmp_path / "empty", "-o", tmp_path / "y")
    assert "nonsense" in cli.error("report", dumps, "-o", tmp_path / "z", "--run-task", "nonsense")
    for rows in ("0", "31", "-1", "nan", "1e3", "x"):
        assert "--rows" in cli.error("report", dumps, "-o", tmp_path / "s", "--rows", rows), rows
    for seed in ("-1", "x", "1.5"):
        assert "--seed" in cli.error("report", dumps, "-o", tmp_path / "s", "--rows", "32", "--seed", seed), seed
    for shard in ("0/2", "3/2", "x", "1/0", "1/2/3", "-1/2", "1/2 "):
        assert "--shard" in cli.error("report", dumps, "-o", tmp_path / "s", "--shard", shard), shard
    assert "--shard" in cli.error("report", dumps, "-o", tmp_path / "s", "--shard", "1/2", "--list-tasks")
    assert "--tensorboard" in cli.error("report", dumps, "-o", tmp_path / "t", "--tensorboard",
                                        dumps / "step10_layer0.safetensors")
    assert "--tensorboard" in cli.error("report", dumps, "-o", tmp_path / "t", "--tensorboard", tmp_path / "tb",
                                        "--shard", "1/2")
    assert not any((tmp_path / d).exists() for d in ("s", "t", "tb")), "before any work"


def test_the_recipe_fit_found_is_compared_as_fitted(cli, dumps, tmp_path):
    """`report --fitted FIT.json` compares the kernel against the recipe `roundscope fit` found
    for it, beside the presets: here the dumps' own fa2-bf16 against fa3-fp8 alone, so that the
    fitted recipe is the nearest, matches every bit, and the first screen has no unmatched kernel.
    Anything but fit's JSON is refused in one line before any work."""
    fit = tmp_path / "fit.json"
    p = cli.run("fit", dumps / "step0_layer0.safetensors", "--from", "fa2-bf16", "--from", "fa3-bf16",
                "--max-evaluations", "80", "--json")
    fit.write_text(p.stdout)
    best = json.loads(p.stdout)["best"]
    out = tmp_path / "fitted"
    cli.run("report", dumps, "-o", out, "--recipe", "fa3-fp8", "--fitted", fit, "--json", timeout=900)
    r = load(out)
    recipes = {x["name"]: x["settings"] for x in r["options"]["recipes"]}
    assert list(recipes) == ["fa3-fp8", "fitted"] and best["preset"] == "fa2-bf16", (recipes, best)
    assert all(recipes["fitted"][k] == v for k, v in best["settings"].items())
    for c in r["compare"]:
        o = c["compare"]["fitted"]["outputs"]["o"]
        assert o["matched"] == o["total"], (c["file"], o["matched"], o["total"])
    page = (out / "report.html").read_text()
    assert "match no compared recipe" not in page and "fitted (nearest)" in page
    # refused, one line, nothing written
    (tmp_path / "garbage.json").write_text("{not json")
    (tmp_path / "nobest.json").write_text('{"candidates": []}')
    (tmp_path / "preset.json").write_text('{"best": {"preset": "no-such-preset", "settings": {}}}')
    (tmp_path / "key.json").write_text('{"best": {"preset": "fa2-bf16", "settings": {"no_such_key": "1"}}}')
    (tmp_path / "value.json").write_text('{"best": {"preset": "fa2-bf16", "settings": {"exp2": 3}}}')
    os.mkfifo(tmp_path / "fifo.json")
    for name, why in (("garbage.json", "not the JSON of roundscope fit"), ("nobest.json", "no \"best\""),
                      ("preset.json", "no-such-preset"), ("key.json", "no_such_key"), ("value.json", "exp2"),
                      ("fifo.json", "not a regular file"), ("missing.json", "not a regular file"),
                      ("", "not a regular file")):
        message = cli.error("report", dumps, "-o", tmp_path / "r", "--fitted", tmp_path / name)
        assert "fitted" in message and why in message and message.count("\n") <= 1, (name, message)
    assert not (tmp_path / "r").exists(), "before any work"


def test_what_would_stop_the_report_late_stops_it_first(cli, dumps, tmp_path):
    """A kernel output of the wrong shape, a mask a recipe cannot take, a step beyond 64 bits, and
    a folder where report.json goes are errors before the first task; an output in another dtype
    than a recipe writes is reported, its compare with that recipe said not done and why."""
    def folder_of(name, **changed):
        folder = tmp_path / name
        folder.mkdir()
        t = tensors(5)
        t.update(changed)
        write_safetensors(folder / f"{name}.safetensors", t, {"causal": "true", "layer": "0", "step": "0"})
        return folder

    for name, changed, recipe, named in (
            ("short_o", {"o": ("BF16", [H, N, D - 1], b"\0" * (2 * H * N * (D - 1)))}, "fa2-bf16", "'o'"),
            ("masked", {"attn_mask": ("BOOL", [N, N], bytes([1]) * (N * N))}, "fa2-bf16-torch", "fa2-bf16-torch")):
        message = cli.error("report", folder_of(name, **changed), "-o", tmp_path / f"r-{name}", "--recipe", recipe)
        assert f"{name}.safetensors" in message and named in message, message
        assert not (tmp_path / f"r-{name}" / "cache").exists(), "before the first task"
    f32 = folder_of("f32_o", o=("F32", [H, N, D], b"\0" * (4 * H * N * D)))  # fa2-bf16 writes o in bf16
    cli.json("report", f32, "-o", tmp_path / "r4", "--recipe", "fa2-bf16", "--no-html")
    layer = json.loads(next((tmp_path / "r4" / "layers").glob("*.json")).read_text())
    assert layer["compare"][0]["compare"]["fa2-bf16"] == {
        "skipped": "o is f32; recipe fa2-bf16 writes bf16 (fa2-f32, fp8-p-cast-only, naive-f32 write o in it)"}
    huge = tmp_path / "huge"
    huge.mkdir()
    write_safetensors(huge / "a.safetensors", tensors(6), {"causal": "true", "layer": "0",
                                                            "step": "99999999999999999999"})
    message = cli.error("report", huge, "-o", tmp_path / "r2")
    assert "99999999999999999999" in message and "step" in message, message
    out = tmp_path / "r3"
    (out / "report.json").mkdir(parents=True)
    assert "report.json" in cli.error("report", dumps, "-o", out)
    assert not (out / "cache").exists(), "before the first task"
    (out / "report.json").rmdir()
    (out / "layers").write_text("a file where the layers go")
    assert "layers" in cli.error("report", dumps, "-o", out)



def test_the_report_removes_nothing_it_did_not_write_and_follows_no_link(cli, dumps, tmp_path):
    """OUT/layers a link to a folder of someone's layer*.json, or an OUT/layers holding a file the
    report did not write: refused before any work (exit 2, one line), nothing touched."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "layer0.json").write_text("someone's")
    (elsewhere / "layer7.json").write_text("someone's")
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "layers").symlink_to(elsewhere)
    m = cli.error("report", dumps, "-o", linked, "--recipe", "fa2-bf16")
    assert "layers" in m and "link" in m, m
    assert sorted(p.read_text() for p in elsewhere.iterdir()) == ["someone's"] * 2
    assert not (linked / "cache").exists() and not (linked / "report.json").exists()
    kept = tmp_path / "kept"
    (kept / "layers").mkdir(parents=True)
    (kept / "layers" / "layer9.json").write_text("mine")
    m = cli.error("report", dumps, "-o", kept, "--recipe", "fa2-bf16")
    assert "layer9.json" in m and "manifest" in m, m
    assert (kept / "layers" / "layer9.json").read_text() == "mine" and not (kept / "cache").exists()
    # a report's own folder is replaced whole, its manifest naming what it wrote
    out = tmp_path / "own"
    report(cli, dumps, out)
    manifest = json.loads((out / "layers" / ".roundscope-layers").read_text())
    assert manifest == {"files": ["layer0.json", "layer1.json"]}
    assert not [p for p in out.iterdir() if p.name.startswith(".report-")], "no staging folder left"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=lambda s: signal.Signals(s).name)
def test_a_signal_just_after_any_temporary_is_made_leaves_the_last_whole_report(cli, dumps, first, tmp_path, sig):
    """A run stopped right after it makes each of its temporary files and folders in turn (its
    cache entries, its staging folder, its layer files, report.json): OUT holds no temporary
    and no staging folder after any of them, and report.json with its layers is absent or whole;
    a second sweep over a finished OUT leaves the earlier report whole every time."""
    shim = build_shim(tmp_path)
    out = tmp_path / "out"
    whole = output_bytes(first[3])
    command = [cli.path, "report", str(dumps), "-o", str(out), "--recipe", "fa2-bf16", "--no-html", "--threads", "1"]

    stopped_while_computing = []

    def after_each(n, code):
        hidden = sorted(str(p.relative_to(out)) for p in out.rglob(".*"))
        assert set(hidden) <= {".roundscope-report.lock", "layers/.roundscope-layers"}, (n, hidden)
        if (out / "report.json").exists() or (out / "layers").exists():
            assert output_bytes(out) == whole, n
        elif code:
            stopped_while_computing.append(n)

    # each stopped run keeps the cache entries it finished, so the next goes one further
    stopped_fresh = runs_stopped_at_each_temporary(shim, command, tmp_path, sig, after_each)
    stopped_again = runs_stopped_at_each_temporary(shim, command, tmp_path, sig, after_each)
    assert stopped_again == 5, "the staging folder, two layer files, the manifest, report.json"
    assert stopped_fresh == len(stopped_while_computing) >= 3, "the fresh sweep stopped before any report"


def test_two_reports_on_one_folder_never_mix(cli, dumps, tmp_path):
    """Runs with different recipes on one -o, at the same time: report.json and the layer files
    are always one run's."""
    out = tmp_path / "shared"
    for round_ in range(3):
        runs = [subprocess.Popen([cli.path, "report", str(dumps), "-o", str(out), "--recipe", recipe, "--no-html",
                                  "--threads", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                for recipe in ("fa2-bf16", "fa3-fp8")]
        for p in runs:
            assert p.wait(600) == 0, p.stderr.read()
        summary = json.loads((out / "report.json").read_text())
        recipes = {r["name"] for r in summary["options"]["recipes"]}
        for layer in summary["layers"]:
            heads = json.loads((out / layer["file"]).read_text())["heads"]
            assert all(set(h["attribute"]) == recipes for h in heads), (round_, recipes)

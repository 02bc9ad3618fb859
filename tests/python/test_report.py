"""roundscope.report, compare and check from Python: the same results as the command line; the
report's tasks run on a local Dask cluster of 2 worker processes give the report a local run
gives, every task computed there (the gathering run finds them all in its cache) with progress
as they finish; run_task gives what the cache holds; shards and TensorBoard from Python."""
import json
import re
import os

import numpy as np
import pytest

import roundscope

H, N, D = 2, 64, 16


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    folder = tmp_path_factory.mktemp("dumps")
    rng = np.random.default_rng(5)
    for step in (0, 10):
        q, k = rng.normal(size=(2, H, N, D)).astype(np.float32)
        q[..., 0], k[..., 0] = 3.0, 0.0
        k[:, 0, 0] = 8.0  # key 0 is a sink
        v, do = rng.normal(-0.3, 1, size=(2, H, N, D)).astype(np.float32)
        o = roundscope.attention(q, k, v, recipe="fa2-bf16", causal=True)["o"]
        roundscope.write(folder / f"step{step}_layer0.safetensors", {"q": q, "k": k, "v": v, "do": do, "o": o},
                         metadata={"causal": "true", "layer": "0", "step": str(step)})
    return folder


@pytest.mark.slow  # several seconds: the full suite runs it, the fast loop does not
def test_report_matches_the_command_line(dumps, tmp_path, cli):
    summary = roundscope.report(dumps, tmp_path / "py", recipe=["fa2-bf16"])
    assert summary["tasks"] == 2 * H and summary["cached"] == 0
    cli.run("report", dumps, "-o", tmp_path / "cli", "--recipe", "fa2-bf16")
    mine, theirs = roundscope.load_report(tmp_path / "py"), roundscope.load_report(tmp_path / "cli")
    assert len(mine["heads"]) == 2 * H and len(mine["compare"]) == 2
    for key in ("files", "heads", "compare", "bias_over_steps"):
        assert mine[key] == theirs[key], key


def test_a_fitted_recipe_is_compared_and_a_bad_fit_file_named(dumps, tmp_path):
    """fitted= adds fit's best recipe (preset and settings, as `report --fitted`) named "fitted";
    a file that is not fit's JSON is a ValueError naming the argument, before anything is written."""
    fit = tmp_path / "fit.json"
    fit.write_text(json.dumps({"best": {"preset": "fa2-bf16", "settings": {"kv_order": "reverse"}}}))
    roundscope.report(dumps, tmp_path / "r", recipe=["fa3-fp8"], fitted=fit, html=False)
    recipes = {x["name"]: x["settings"] for x in roundscope.load_report(tmp_path / "r")["options"]["recipes"]}
    assert list(recipes) == ["fa3-fp8", "fitted"] and recipes["fitted"]["kv_order"] == "reverse"
    assert recipes["fitted"]["block_n"] == "64", "fa2-bf16's own settings under the change"
    fit.write_text("[]")
    with pytest.raises(ValueError, match="fitted"):
        roundscope.report(dumps, tmp_path / "bad", fitted=fit, html=False)
    assert not (tmp_path / "bad").exists()


@pytest.mark.slow  # several seconds: the full suite runs it, the fast loop does not
def test_report_on_a_dask_cluster(dumps, tmp_path):
    distributed = pytest.importorskip("distributed")  # tools/setup.sh installs it; missing, the check below fails
    local = roundscope.report(dumps, tmp_path / "local", recipe=["fa2-bf16"])
    seen = []
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        workers = len(client.scheduler_info()["workers"])
        summary = roundscope.report(dumps, tmp_path / "dask", recipe=["fa2-bf16"], client=client,
                                    progress=lambda *p: seen.append(p), progress_every=0)
        # a sampled report's tasks carry its options to the workers
        sampled = roundscope.report(dumps, tmp_path / "dask_rows", recipe=["fa2-bf16"], rows=32, seed=1,
                                    client=client, progress=None)
    assert workers == 2
    # every task ran on the cluster (and says so): the gathering run found them all in the cache
    assert summary["cluster_tasks"] == summary["cached"] == summary["tasks"] == local["tasks"]
    assert [p[:2] for p in seen] == [(i, local["tasks"]) for i in range(1, local["tasks"] + 1)], "each as it came"
    for name in ("report.json", "layers/layer0.json"):
        assert (tmp_path / "local" / name).read_bytes() == (tmp_path / "dask" / name).read_bytes(), name
    assert sampled["cluster_tasks"] == sampled["cached"] == local["tasks"]
    local_rows = roundscope.report(dumps, tmp_path / "local_rows", recipe=["fa2-bf16"], rows=32, seed=1)
    assert local_rows["cached"] == 0
    for name in ("report.json", "layers/layer0.json"):
        assert (tmp_path / "local_rows" / name).read_bytes() == (tmp_path / "dask_rows" / name).read_bytes(), name
    assert roundscope.load_report(tmp_path / "dask_rows")["heads"][0]["sample"]["rows"] == 32
    assert "Plotly.newPlot" in (tmp_path / "dask" / "report.html").read_text()


def test_run_task_shards_and_tensorboard_from_python(dumps, tmp_path):
    tasks = roundscope.list_tasks(dumps, recipe=["fa2-bf16"])
    assert len(tasks) == 2 * H and [t["head"] for t in tasks] == list(range(H)) * 2
    local = roundscope.report(dumps, tmp_path / "local", recipe=["fa2-bf16"], html=False)
    assert local["html"] is None and not (tmp_path / "local" / "report.html").exists()
    t = tasks[1]
    sampled = roundscope.list_tasks(dumps, recipe=["fa2-bf16"], rows=32, seed=2)
    assert [x["key"] for x in sampled] != [x["key"] for x in tasks], "the sample is in the key"
    assert roundscope.run_task(dumps, sampled[0]["key"], recipe=["fa2-bf16"], rows=32, seed=2)["sample"]["seed"] == 2
    assert roundscope.run_task(dumps, t["key"], t["file"], recipe=["fa2-bf16"]) == json.loads(
        (tmp_path / "local" / "cache" / (t["key"] + ".json")).read_text())
    for i in (1, 2):
        assert roundscope.report(dumps, tmp_path / "sharded", recipe=["fa2-bf16"], shard=f"{i}/2")["shard"] == f"{i}/2"
    gathered = roundscope.report(dumps, tmp_path / "sharded", recipe=["fa2-bf16"], html=False,
                                 tensorboard=tmp_path / "tb", tensorboard_run="sharded", tensorboard_heads=True)
    assert gathered["cached"] == gathered["tasks"] and os.listdir(tmp_path / "tb") == ["sharded"]
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    tags = EventAccumulator(str(tmp_path / "tb" / "sharded")).Reload().Tags()["scalars"]
    assert "sink_mass/layer00" in tags and "sink_mass/layer00/head 0" in tags, tags
    with pytest.raises(ValueError, match="^tensorboard_run"):
        roundscope.report(dumps, tmp_path / "y", tensorboard=tmp_path / "tb", tensorboard_run="../up")
    for name in ("report.json", "layers/layer0.json"):
        assert (tmp_path / "sharded" / name).read_bytes() == (tmp_path / "local" / name).read_bytes(), name
    with pytest.raises(ValueError, match="^shard"):
        roundscope.report(dumps, tmp_path / "x", shard="3/2")
    with pytest.raises(ValueError, match="no task"):
        roundscope.run_task(dumps, "nonsense")


def test_distributed_is_installed():
    """CI's environment has Dask (tools/setup.sh): the cluster test above must not skip there."""
    import distributed  # noqa: F401


def test_compare_and_check(dumps, tmp_path, cli):
    path = dumps / "step0_layer0.safetensors"
    r = roundscope.compare(path, "fa2-bf16")
    assert r["outputs"]["o"]["matched"] == H * N * D
    assert r == cli.json("compare", path, "--recipe", "fa2-bf16")
    # check from Python on two of the H100's captures (the whole folder, with its conversion digests
    # over every float32, is the command line's golden_files_check)
    import shutil

    golden = os.path.join(os.path.dirname(__file__), "..", "data", "golden", "h100")
    (tmp_path / "golden").mkdir()
    for name in ("mma_bf16.safetensors", "mma_e4m3.safetensors"):
        shutil.copy(os.path.join(golden, name), tmp_path / "golden" / name)
    c = roundscope.check(tmp_path / "golden", junit=tmp_path / "junit.xml")
    assert c["failed"] == 0 and c["passed"] == 2
    assert (tmp_path / "junit.xml").read_text().startswith("<?xml")


def test_report_errors(dumps, tmp_path):
    with pytest.raises(ValueError, match="no-such-recipe"):
        roundscope.report(dumps, tmp_path / "x", recipe=["no-such-recipe"])
    with pytest.raises(ValueError, match="-o"):
        roundscope.report(dumps, dumps)
    for rows in (0, 31, -5):
        with pytest.raises(ValueError, match="^rows: "):
            roundscope.report(dumps, tmp_path / "r", rows=rows)
    with pytest.raises(TypeError, match="rows"):
        roundscope.report(dumps, tmp_path / "r", rows=True)
    with pytest.raises(ValueError, match="^seed: "):
        roundscope.report(dumps, tmp_path / "r", rows=32, seed=-1)


PAYLOAD = '"><img src=x onerror=alert(1)><script>alert(2)</script>'


def _page_writer(*args):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "roundscope._report_page", *map(str, args)], capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})


@pytest.fixture(scope="module")
def fa2_report(dumps, tmp_path_factory):
    """A report of the dumps against fa2-bf16, without its page: a test edits a copy of it."""
    out = tmp_path_factory.mktemp("fa2_report") / "r"
    roundscope.report(dumps, out, recipe=["fa2-bf16"], html=False)
    return out


def _copy_of(report, tmp_path):
    import shutil

    return shutil.copytree(report, tmp_path / "r")


def _edit_report(out, edit_report=None, edit_layer=None):
    report = json.loads((out / "report.json").read_text())
    layers = [layer["file"] for layer in report["layers"]]
    if edit_report:
        edit_report(report)
    (out / "report.json").write_text(json.dumps(report))
    for file in layers:
        path = out / file
        content = json.loads(path.read_text())
        if edit_layer:
            edit_layer(content)
        path.write_text(json.dumps(content))


def test_a_hand_edited_report_injects_nothing_into_its_page(fa2_report, tmp_path):
    """A shared report.json edited by hand, with markup in every text field the page shows
    (options, the folder, a recipe name, a head's file, a compare's file, recipe and output
    names, a figure's name): the page escapes each one, in text, attributes and the charts' JSON (Plotly draws a
    subset of HTML); and the page writer refuses to write over the report it reads."""
    out = _copy_of(fa2_report, tmp_path)

    def edit_report(report):
        report["options"]["k_sink"] = PAYLOAD
        report["options"]["rows"], report["options"]["seed"] = PAYLOAD, PAYLOAD
        report["options"]["recipes"][0]["name"] = PAYLOAD
        report["dir"] = PAYLOAD

    def edit_layer(content):
        for h in content["heads"]:
            h["file"] = PAYLOAD
            h["attribute"][PAYLOAD] = h["attribute"].pop("fa2-bf16")  # a figure's name
        for c in content["compare"]:
            c["file"] = PAYLOAD
            for recipe in list(c["compare"]):
                c["compare"][recipe]["outputs"][PAYLOAD] = c["compare"][recipe]["outputs"].pop("o")
            c["compare"][PAYLOAD] = c["compare"].pop("fa2-bf16")

    _edit_report(out, edit_report, edit_layer)
    p = _page_writer(out / "report.json", out / "page.html")
    assert p.returncode == 0, p.stderr
    page = (out / "page.html").read_text()
    assert "<img" not in page and "<script>alert" not in page and "onerror=alert(1)>" not in page
    assert page.count("&lt;img src=x onerror=alert(1)&gt;") > 5, "the fields are shown, escaped"
    # the per-head view's figure names: JSON with no '<' in it, the name itself once parsed (shown as text)
    meta = re.search(r'<script type="application/json" id="head-metrics">(.*?)</script>', page).group(1)
    assert not set("<>&") & set(meta) and any(PAYLOAD in m["label"] for m in json.loads(meta)), meta[:300]
    before = (out / "report.json").read_bytes()
    p = _page_writer(out / "report.json", out / "." / "report.json")
    assert p.returncode == 2 and "is the report it reads" in p.stderr, p.stderr
    assert (out / "report.json").read_bytes() == before


def _set_bias(key, value):
    def edit(report):
        report["bias_over_steps"] = [{"layer": 0, "head": 0, "steps": [0, 1], "cumulative": [0.5, 1.0], key: value}]
    return edit


def _set_head(key, value):
    def edit(content):
        content["heads"][0][key] = value
    return edit


def _set_output(key, value):
    def edit(content):
        content["compare"][0]["compare"]["fa2-bf16"]["outputs"]["o"][key] = value
    return edit


def _set_layer_file(name):
    def edit(report):
        report["layers"][0]["file"] = name
    return edit


@pytest.mark.parametrize("edit_report, edit_layer, named", [
    (_set_bias("layer", PAYLOAD), None, "bias_over_steps[0].layer"),
    (_set_bias("head", -1), None, "bias_over_steps[0].head"),
    (_set_bias("steps", [0, PAYLOAD]), None, "bias_over_steps[0].steps[1]"),
    (_set_bias("cumulative", [1.0]), None, "bias_over_steps[0].cumulative"),
    (None, _set_head("head", PAYLOAD), "heads[0].head"),
    (None, _set_head("head", 1.5), "heads[0].head"),
    (None, _set_head("step", PAYLOAD), "heads[0].step"),
    (None, _set_head("step", 2**63), "heads[0].step"),
    (None, _set_head("layer", True), "heads[0].layer"),
    (None, _set_head("sampling_error", []), "heads[0].sampling_error"),
    (None, _set_output("matched", 10**400), "outputs.o.matched"),
    (None, _set_output("total", None), "outputs.o.total"),
    (None, _set_output("ulp_histogram", [{"ulps": "<b>", "count": 1}]), "ulp_histogram[0].ulps"),
    (None, _set_output("ulp_histogram", [{"ulps": "0", "count": -1}]), "ulp_histogram[0].count"),
    (_set_layer_file("../../outside.json"), None, "layers[0].file"),
    (_set_layer_file("/etc/passwd"), None, "layers[0].file"),
    (_set_layer_file("layers//x.json"), None, "layers[0].file"),
    (_set_layer_file(7), None, "layers[0].file"),
])
def test_a_report_not_as_roundscope_writes_it_is_refused_in_one_line(fa2_report, tmp_path, capsys, edit_report,
                                                                      edit_layer, named):
    """Where a field the page reads is not what `roundscope report` writes (markup where a number
    belongs, an integer past 64 bits, a layer file outside the report's folder), the page writer
    and the TensorBoard exporter refuse it in one line naming the field, exit 2, and write nothing."""
    from roundscope import _report_page, _report_tensorboard

    out = _copy_of(fa2_report, tmp_path)
    _edit_report(out, edit_report, edit_layer)
    for writer, target in ((_report_page, out / "page.html"), (_report_tensorboard, tmp_path / "tb")):
        with pytest.raises(SystemExit) as e:
            writer.main(["", str(out / "report.json"), str(target)])
        err = capsys.readouterr().err
        assert e.value.code == 2 and named in err and err.count("\n") == 1 and "<" not in err, err
        assert not target.exists()


def test_a_layer_file_linked_out_of_the_report_folder_is_refused(fa2_report, tmp_path):
    out = _copy_of(fa2_report, tmp_path)
    report = json.loads((out / "report.json").read_text())
    outside = tmp_path / "elsewhere.json"
    (out / report["layers"][0]["file"]).rename(outside)
    (out / report["layers"][0]["file"]).symlink_to(outside)
    p = _page_writer(out / "report.json", out / "page.html")
    assert p.returncode == 2 and "out of the report's folder" in p.stderr, p.stderr


def test_a_kernel_output_with_a_nan_is_reported_not_a_crash(dumps, tmp_path):
    """A NaN in a dump's O (a kernel that blew up) is what a user runs report to find: the report
    says "nan" where the sums meet it (the report once exited 'internal: type_error.302'), its page
    is written, and the TensorBoard export counts the element as nan_one_side instead of crashing."""
    import shutil

    folder = shutil.copytree(dumps, tmp_path / "dumps")
    path = folder / "step10_layer0.safetensors"
    tensors = roundscope.read(path)
    o = np.array(tensors["o"])
    o.reshape(-1)[5 * D + 3] = np.nan  # head 0, query 5
    roundscope.write(path, {**tensors, "o": o}, metadata={"causal": "true", "layer": "0", "step": "10"})
    out = tmp_path / "r"
    roundscope.report(folder, out, recipe=["fa2-bf16"], tensorboard=tmp_path / "tb")
    report = roundscope.load_report(out)
    kernel = [b for b in report["bias_over_steps"] if b["head"] == 0][0]
    assert kernel["cumulative"][0] != "nan" and kernel["cumulative"][-1] == "nan"
    o_stats = [c["compare"]["fa2-bf16"]["outputs"]["o"] for c in report["compare"] if c["step"] == 10][0]
    assert o_stats["matched"] == o_stats["total"] - 1
    assert {"ulps": "nan", "count": 1} in o_stats["ulp_histogram"]
    assert "<html" in (out / "report.html").read_text()
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    tags = EventAccumulator(str(tmp_path / "tb" / "dumps")).Reload().Tags()["scalars"]
    assert "compare/fa2-bf16/o/nan_one_side/layer00" in tags, tags
    # the head whose O holds the NaN makes its layer's mean NaN at that step, not left out of it
    import math

    mean = {e.step: e.value for e in EventAccumulator(str(tmp_path / "tb" / "dumps")).Reload().Scalars(
        "bias/cumulative/layer00")}
    assert math.isnan(mean[10]) and math.isfinite(mean[0]), mean
    # the head's own figure is NaN, not "no value": its layer's mean is NaN, the page's first screen
    # names it first, its table cell says NaN, and the charts say what they could not draw
    figure = {e.step: e.value for e in EventAccumulator(str(tmp_path / "tb" / "dumps")).Reload().Scalars(
        "bias_coefficient/layer00")}
    assert math.isnan(figure[10]) and math.isfinite(figure[0]), figure
    from roundscope import _report_metrics as rm
    from roundscope import _report_page

    page = _report_page.Page(*rm.read_report(out / "report.json"))
    nan_heads = [h for h in page.heads if h["values"]["bias_coefficient"] is not None
                 and math.isnan(h["values"]["bias_coefficient"])]
    assert [(h["step"], h["head"]) for h in nan_heads] == [(10, 0)], nan_heads
    first = page.worst_first()
    line = [x for x in first.split("<li") if "error summed over rows" in x]
    assert line and "(NaN)" in line[0] and "step 10" in line[0], first
    assert "<td data-v=\"nan\"" in page.heads_table() and ">NaN<" in page.heads_table()
    page.render("")
    assert any("NaN or infinite value(s) not drawn" in c["layout"]["title"]["text"] for c in page.charts)


def test_the_page_scales_sampled_totals_and_keeps_units_and_orders_apart(dumps, tmp_path):
    """A sampled head's totals over rows are estimates for the whole head (the sample's sum times
    rows / sampled rows, its error alike), fractions stay as measured; a chart by layer holds one
    unit (sink mass and score spread apart), its layer axis ticks whole numbers, the ulp buckets
    run in order with nan last."""
    from roundscope import _report_metrics as rm
    from roundscope import _report_page

    out = tmp_path / "sampled"
    roundscope.report(dumps, out, recipe=["fa2-bf16"], rows=32, seed=3, html=False)
    report, heads, compare = rm.read_report(out / "report.json")
    raw = {(h["file"], h["head"]): h for h in roundscope.load_report(out)["heads"]}
    metric = {m.name: m for m in rm.HEAD_METRICS}
    for h in heads:
        r = raw[(h["file"], h["head"])]
        assert r["sample"]["rows"] == 32 and r["sample"]["of"] == N
        for name in ("bias_coefficient", "bias_tied_rows", "headroom_f16_overflow_rows"):
            x = metric[name].get(r, r)
            assert metric[name].total and h["values"][name] == pytest.approx(x * N / 32), name
        assert h["values"]["sink_mass"] == r["pcollapse"]["sink_mass"], "a fraction is not scaled"
    for series in report["bias_over_steps"]:  # each sampled sum scaled up as the page scales it
        for step, total in zip(series["steps"], series["coefficient_sum"]):
            parts = [h["values"]["bias_coefficient"] for h in heads if h["step"] == step and h["head"] % H ==
                     series["head"]]
            assert parts and total == pytest.approx(sum(parts), rel=1e-12)
    page = _report_page.Page(report, heads, compare)
    page.render("")
    for c in page.charts:
        units = {t["name"].rsplit(" (", 1)[0] for t in c["data"]}
        assert len({metric[m.name].unit for m in rm.HEAD_METRICS if m.label in units}) <= 1, c["layout"]["title"]
        if c["layout"]["xaxis"]["title"]["text"] in ("layer", "step"):
            assert c["layout"]["xaxis"]["dtick"] >= 1 and isinstance(c["layout"]["xaxis"]["dtick"], int)
    titles = [c["layout"]["yaxis"]["title"]["text"] for c in page.charts]
    assert "nats" in titles and "share" in titles and "rows (estimated, whole head)" in titles, titles
    buckets = ["nan", ">1024", "2-3", "0", "16-31", "1"]
    assert sorted(buckets, key=_report_page._bucket_order) == ["0", "1", "2-3", "16-31", ">1024", "nan"]


def test_the_first_screen_tells_facts_of_the_recipe_from_findings_and_reds_only_the_nearest(dumps, tmp_path):
    """Leakage past its threshold on every head-step of a causal dump is the format's doing: listed
    as a fact of the recipe, not as a finding. A compared recipe far from the kernel (fa3-fp8
    against a BF16 kernel) is not red; the nearest one is, where it misses bits, and the first
    screen then says so and points at `roundscope fit`."""
    import re

    from roundscope import _report_metrics as rm
    from roundscope import _report_page

    out = tmp_path / "r"
    roundscope.report(dumps, out, recipe=["fa2-bf16", "fa3-fp8"], html=False)
    page = _report_page.Page(*rm.read_report(out / "report.json"))
    first, compare = page.worst_first(), page.compare_section()
    leak = [h["values"]["leak_mxfp4_pairs"] for h in page.heads]
    assert all(x > 0 for x in leak), "causal dumps: MXFP4 V leaks on every head"
    facts = first[first.index("Facts of the recipes"):]
    assert "leaking (query, later key) pairs, MXFP4 V" in facts and "diagonal_fix" in facts
    findings = first[:first.index("Facts of the recipes")]
    assert "MXFP4 V" not in findings and "match no compared recipe" not in findings
    bad_rows = [row for row in compare.split("<tr>") if 'class="bad"' in row]
    assert not bad_rows, "the kernel is fa2-bf16's emulation: its nearest recipe matches, fa3-fp8 is not red"
    assert compare.count("fa2-bf16 (nearest)") == 2 and "fa3-fp8 (nearest)" not in compare
    # one value off in one file's o: the nearest recipe misses it, red, and the first screen says so
    path = dumps.parent / "edited"
    import shutil

    shutil.copytree(dumps, path)
    tensors = roundscope.read(path / "step10_layer0.safetensors")
    o = np.array(tensors["o"]).copy()
    o.reshape(-1)[7] = np.float32(o.reshape(-1)[7]) * np.float32(1.5)
    roundscope.write(path / "step10_layer0.safetensors", {**tensors, "o": o},
                     metadata=roundscope.read_metadata(path / "step10_layer0.safetensors"))
    roundscope.report(path, tmp_path / "e", recipe=["fa2-bf16", "fa3-fp8"], html=False)
    page = _report_page.Page(*rm.read_report(tmp_path / "e" / "report.json"))
    first, compare = page.worst_first(), page.compare_section()
    assert re.search(r"match no compared recipe bit for bit in 1 of 2 file\(s\).*step10_layer0.*nearest fa2-bf16",
                     first), first
    assert "roundscope fit" in first
    bad_rows = [row for row in compare.split("<tr>") if 'class="bad"' in row]
    assert len(bad_rows) == 1 and "fa2-bf16 (nearest)" in bad_rows[0] and "step10_layer0" in bad_rows[0]


def test_the_page_shares_its_chart_library_beside_it_and_refuses_a_foreign_file_there(fa2_report, tmp_path):
    """The page loads plotly-VERSION.min.js from its own folder, written once (a second page finds
    the same bytes); a different file under that name is not overwritten: one line, exit 2, no
    page. One table of every head, filtered by layer, no copy per layer."""
    import plotly

    library = f"plotly-{plotly.__version__}.min.js"
    out = tmp_path / "pages"
    out.mkdir()
    for name in ("a.html", "b.html"):
        p = _page_writer(fa2_report / "report.json", out / name)
        assert p.returncode == 0, p.stderr
    assert sorted(x.name for x in out.iterdir()) == ["a.html", "b.html", library]
    text = (out / "a.html").read_text()
    assert f'<body data-plotly="{library}">' in text and text.count("<table id=\"heads-table\"") == 1
    assert '<select id="layer-filter"><option value="">every layer</option><option value="0">layer 0</option>' in text
    assert 'data-layer="0"' in text
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / library).write_text("not plotly")
    p = _page_writer(fa2_report / "report.json", foreign / "page.html")
    assert p.returncode == 2 and library in p.stderr and p.stderr.count("\n") == 1, p.stderr
    assert (foreign / library).read_text() == "not plotly" and not (foreign / "page.html").exists()

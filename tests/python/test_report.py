"""roundscope.report, compare and check from Python: the same results as the command line; the
report's tasks run on a local Dask cluster of 2 worker processes give the report a local run
gives, every task computed there (the gathering run finds them all in its cache) with progress
as they finish; run_task gives what the cache holds; shards and TensorBoard from Python."""
import json
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


def test_report_matches_the_command_line(dumps, tmp_path, cli):
    summary = roundscope.report(dumps, tmp_path / "py", recipe=["fa2-bf16"])
    assert summary["tasks"] == 2 * H and summary["cached"] == 0
    cli.run("report", dumps, "-o", tmp_path / "cli", "--recipe", "fa2-bf16")
    mine, theirs = roundscope.load_report(tmp_path / "py"), roundscope.load_report(tmp_path / "cli")
    assert len(mine["heads"]) == 2 * H and len(mine["compare"]) == 2
    for key in ("files", "heads", "compare", "bias_over_steps"):
        assert mine[key] == theirs[key], key


def test_report_on_a_dask_cluster(dumps, tmp_path):
    distributed = pytest.importorskip("distributed")  # tools/setup.sh installs it; missing, the check below fails
    local = roundscope.report(dumps, tmp_path / "local", recipe=["fa2-bf16"])
    seen = []
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
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
                                 tensorboard=tmp_path / "tb")
    assert gathered["cached"] == gathered["tasks"] and os.listdir(tmp_path / "tb")
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
    golden = os.path.join(os.path.dirname(__file__), "..", "data", "golden")
    c = roundscope.check(golden, junit=tmp_path / "junit.xml")
    assert c["failed"] == 0 and c["passed"] > 0
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


def test_a_hand_edited_report_injects_nothing_into_its_page(dumps, tmp_path):
    """A shared report.json edited by hand, with markup in every field the page shows (options,
    a head's id and file, a compare output's name, bias_over_steps' layer and head, a recipe name):
    the page escapes each one, in text, attributes and the charts' JSON (Plotly draws a subset of
    HTML); and the page writer refuses to write over the report it reads."""
    import subprocess
    import sys

    out = tmp_path / "r"
    roundscope.report(dumps, out, recipe=["fa2-bf16"], html=False)
    report = json.loads((out / "report.json").read_text())
    report["options"]["k_sink"] = PAYLOAD
    report["options"]["rows"], report["options"]["seed"] = PAYLOAD, PAYLOAD
    report["options"]["recipes"][0]["name"] = PAYLOAD
    report["dir"] = PAYLOAD
    for s in report.get("bias_over_steps", []):
        s["layer"], s["head"] = PAYLOAD, PAYLOAD
    (out / "report.json").write_text(json.dumps(report))
    for layer in report["layers"]:
        path = out / layer["file"]
        content = json.loads(path.read_text())
        for h in content["heads"]:
            h["head"], h["file"], h["step"] = PAYLOAD, PAYLOAD, PAYLOAD
        for c in content["compare"]:
            c["file"] = PAYLOAD
            for recipe in list(c["compare"]):
                c["compare"][recipe]["outputs"][PAYLOAD] = c["compare"][recipe]["outputs"].pop("o")
            c["compare"][PAYLOAD] = c["compare"].pop("fa2-bf16")
        path.write_text(json.dumps(content))
    run = lambda *a: subprocess.run([sys.executable, "-m", "roundscope._report_page", *map(str, a)], capture_output=True,
                                    text=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    p = run(out / "report.json", out / "page.html")
    assert p.returncode == 0, p.stderr
    page = (out / "page.html").read_text()
    assert "<img" not in page and "<script>alert" not in page and "onerror=alert(1)>" not in page
    assert page.count("&lt;img src=x onerror=alert(1)&gt;") > 5, "the fields are shown, escaped"
    before = (out / "report.json").read_bytes()
    p = run(out / "report.json", out / "." / "report.json")
    assert p.returncode != 0 and "is the report it reads" in p.stderr, p.stderr
    assert (out / "report.json").read_bytes() == before

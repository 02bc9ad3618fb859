"""rs.fit: the recipe search from Python, on files or arrays, its arguments checked with messages
that name them."""
import numpy as np
import pytest

import roundscope as rs


@pytest.fixture(scope="module")
def kernel():
    rng = np.random.default_rng(4)
    q, k, v = (rng.standard_normal((2, 128, 16)).astype(np.float32) for _ in range(3))
    out = rs.attention(q, k, v, recipe="fa2-bf16", settings={"kv_order": "reverse", "block_n": 32})
    return {"q": q, "k": k, "v": v, "o": out["o"], "lse": out["lse"]}


def test_fit_on_arrays_finds_the_kernel(kernel):
    r = rs.fit(kernel, presets=["fa2-bf16"], rows=16)
    assert r["exact"] and r["best"]["preset"] == "fa2-bf16", r["best"]
    again = rs.attention(kernel["q"], kernel["k"], kernel["v"], recipe="fa2-bf16", settings=r["best"]["settings"])
    assert np.array_equal(np.asarray(again["o"]).view(np.uint16), np.asarray(kernel["o"]).view(np.uint16))


def test_several_dumps_and_their_messages(kernel, tmp_path):
    path = tmp_path / "k.safetensors"
    rs.write(path, kernel)
    r = rs.fit([path, kernel], presets=["fa2-bf16"], keys=["kv_order", "block_n"])
    assert r["exact"] and r["best"]["total"] == 2 * 2 * 128 * 17
    with pytest.raises(ValueError, match="presets: .*fa9-bf16"):
        rs.fit(kernel, presets=["fa9-bf16"])
    with pytest.raises(TypeError, match="presets"):
        rs.fit(kernel, presets="fa2-bf16")
    with pytest.raises(ValueError, match="rows"):
        rs.fit(kernel, rows=0)
    with pytest.raises(ValueError, match="'colour' is not a recipe key"):
        rs.fit(kernel, keys=["colour"])

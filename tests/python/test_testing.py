"""roundscope.testing.assert_matches: a kernel's outputs in memory against a recipe's emulation,
every bit by default or within check's tolerances, with a message naming the output, the count,
the furthest element and its values, NaN where the truth is finite and sign flips near zero."""
import numpy as np
import pytest

import roundscope as rs
import roundscope.testing as rt

N, D = 256, 32  # four KV tiles: the KV order changes bits


@pytest.fixture(scope="module")
def inputs():
    rng = np.random.default_rng(3)
    x = {n: rng.standard_normal((2, N, D)).astype(np.float32) for n in ("q", "k", "v", "do")}
    x["v"][..., 0] *= 1e-4  # every row's first output near zero
    return x


@pytest.fixture(scope="module")
def forward(inputs):
    return rs.attention(inputs["q"], inputs["k"], inputs["v"], recipe="fa2-bf16", backward=True, do=inputs["do"])


def test_the_recipes_own_outputs_match_every_bit(inputs, forward):
    outputs = {n: forward[n] for n in ("o", "lse", "dq", "dk", "dv")}
    r = rt.assert_matches(outputs, inputs["q"], inputs["k"], inputs["v"], do=inputs["do"])
    assert r["matched"] == r["total"] and sorted(r["outputs"]) == ["dk", "dq", "dv", "lse", "o"]


def test_another_kv_order_fails_with_the_output_the_count_and_the_furthest_element(inputs):
    other = rs.attention(inputs["q"], inputs["k"], inputs["v"], recipe="fa2-bf16", settings={"kv_order": "reverse"})
    with pytest.raises(AssertionError) as e:
        rt.assert_matches({"o": other["o"], "lse": other["lse"]}, inputs["q"], inputs["k"], inputs["v"])
    message = str(e.value)
    assert message.startswith("the kernel's outputs do not match recipe fa2-bf16 (every bit):"), message
    r = rs.compare({**{n: inputs[n] for n in "qkv"}, "o": other["o"]}, "fa2-bf16")
    o = r["outputs"]["o"]
    assert 0 < o["matched"] < o["total"]
    assert f"o: {o['total'] - o['matched']} of {o['total']} elements differ" in message, message
    assert f"furthest at {o['largest_difference']['index']}" in message, message
    # within tolerances that the order's differences meet
    rt.assert_matches({"o": other["o"]}, inputs["q"], inputs["k"], inputs["v"],
                      min_match=o["matched"] / o["total"], max_row_ulp=float(o["max_row_ulp"]))
    with pytest.raises(AssertionError, match="min_match 1"):
        rt.assert_matches({"o": other["o"]}, inputs["q"], inputs["k"], inputs["v"], min_match=1.0)


def test_nan_and_a_sign_flip_near_zero_are_named(inputs, forward):
    o = np.asarray(forward["o"]).copy()
    o[1, 7, 0] = -o[1, 7, 0]  # near zero: v's first feature is tiny
    o[0, 3, 2] = np.nan
    with pytest.raises(AssertionError) as e:
        rt.assert_matches({"o": o}, inputs["q"], inputs["k"], inputs["v"], max_row_ulp=4)
    message = str(e.value)
    assert "1 NaN or Inf where the truth is finite, the first at [0, 3, 2]" in message, message
    assert "1 sign flip(s) near zero" in message, message
    o[0, 3, 2] = np.asarray(forward["o"])[0, 3, 2]
    rt.assert_matches({"o": o}, inputs["q"], inputs["k"], inputs["v"], max_row_ulp=4)  # the flip alone passes
    with pytest.raises(AssertionError):
        rt.assert_matches({"o": o}, inputs["q"], inputs["k"], inputs["v"], max_ulp=4)  # in its own ulps it is far


def test_rtol_and_atol_as_torch_testing_reads_them(inputs, forward):
    o = np.asarray(forward["o"]).copy()
    o[0, 0, 5] = o[0, 0, 5] * 1.01
    rt.assert_matches({"o": o}, inputs["q"], inputs["k"], inputs["v"], rtol=0.02, atol=0.0)
    with pytest.raises(AssertionError, match="1 outside rtol and atol"):
        rt.assert_matches({"o": o}, inputs["q"], inputs["k"], inputs["v"], rtol=0.001, atol=0.0)


@pytest.mark.parametrize("kwargs, error, words", [
    ({"outputs": {"p": None}}, ValueError, "'p' is not a kernel output"),
    ({"outputs": {}}, TypeError, "outputs"),
    ({"min_match": 1.5}, ValueError, "min_match"),
    ({"max_ulp": True}, ValueError, "max_ulp"),
    ({"max_ulp": -1}, ValueError, "max_ulp"),
    ({"max_row_ulp": float("nan")}, ValueError, "max_row_ulp"),
    ({"rtol": 0.1}, TypeError, "rtol and atol"),
    ({"recipe": "fa9-bf16"}, ValueError, "fa9-bf16"),
])
def test_bad_arguments_name_themselves(inputs, forward, kwargs, error, words):
    outputs = kwargs.pop("outputs", {"o": forward["o"]})
    with pytest.raises(error, match=words):
        rt.assert_matches(outputs, inputs["q"], inputs["k"], inputs["v"], **kwargs)


def test_an_output_in_another_dtype_than_the_recipe_writes_is_refused(inputs, forward):
    with pytest.raises(ValueError, match="o"):
        rt.assert_matches({"o": np.asarray(forward["o"]).astype(np.float32)}, inputs["q"], inputs["k"], inputs["v"])


def test_the_example_of_docs_python_md_prints_what_the_page_shows():
    import re

    from conftest import ROOT
    page = (ROOT / "docs" / "python.md").read_text()
    code, shown = re.search(r"<!-- assert_matches example -->\n```python\n(.*?)```\n\n```text\n(.*?)```", page,
                            flags=re.S).groups()
    with pytest.raises(AssertionError) as e:
        exec(code, {})
    assert f"AssertionError: {e.value}" == shown.rstrip("\n")
    scope: dict = {}
    exec(code.rsplit("\n", 2)[0], scope)  # all but the assertion
    kernel, q, k, v = scope["kernel"], scope["q"], scope["k"], scope["v"]
    both = {"o": kernel["o"], "lse": kernel["lse"]}
    rt.assert_matches(both, q, k, v, max_row_ulp=2)  # what the page says of it
    with pytest.raises(AssertionError, match="o: 60081 of 131072(.|\n)*lse: 209 of 2048"):
        rt.assert_matches(both, q, k, v, min_match=0.9)


def test_the_torch_cpu_example_passes_as_the_page_says():
    """PyTorch's CPU attention against torch-cpu-bf16, every bit (docs/python.md)."""
    import re

    import roundscope.torch as rst
    try:
        rst.cpu_settings()
    except ValueError as e:
        pytest.skip(str(e))
    from conftest import ROOT
    page = (ROOT / "docs" / "python.md").read_text()
    code = re.search(r"<!-- torch-cpu example -->\n```python\n(.*?)```", page, flags=re.S).group(1)
    exec(code, {})


def test_the_torch_cpu_math_example_passes_as_the_page_says():
    """PyTorch's CPU math path (V's head dimension not Q's) against torch-cpu-math (docs/python.md)."""
    import re

    import roundscope.torch as rst
    try:
        rst.cpu_math_settings()
    except ValueError as e:
        pytest.skip(str(e))
    from conftest import ROOT
    page = (ROOT / "docs" / "python.md").read_text()
    code = re.search(r"<!-- torch-cpu-math example -->\n```python\n(.*?)```", page, flags=re.S).group(1)
    exec(code, {})

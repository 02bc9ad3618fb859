"""roundscope.results declares every key of every analysis result, both ways: each key a real
result holds is declared (at every level the declarations reach), and each key declared as always
present is there, over the options that add keys (docs/cli.md)."""
import typing

import numpy as np
import pytest

import roundscope as rs
from roundscope import results


def keys_of(cls):
    return set(cls.__required_keys__), set(cls.__optional_keys__)


def inner(hint):
    """The TypedDict inside List[X] or Dict[str, X], and how to reach its values."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is list and args and typing.is_typeddict(args[0]):
        return args[0], lambda v: v
    if origin is dict and len(args) == 2 and typing.is_typeddict(args[1]):
        return args[1], lambda v: list(v.values())
    return None, None


def check(value, cls, where):
    required, optional = keys_of(cls)
    assert set(value) <= required | optional, (where, set(value) - required - optional)
    assert required <= set(value), (where, required - set(value))
    hints = typing.get_type_hints(cls)
    for key, item in value.items():
        if typing.is_typeddict(hints[key]):
            check(item, hints[key], f"{where}.{key}")
            continue
        element, items = inner(hints[key])
        if element is not None:
            for i, x in enumerate(items(item)):
                check(x, element, f"{where}.{key}[{i}]")


@pytest.fixture(scope="module")
def dump(tmp_path_factory):
    rng = np.random.default_rng(0)
    x = {n: rng.standard_normal((2, 64, 16)).astype(np.float32) for n in ("q", "k", "v", "do")}
    kernel = rs.attention(x["q"], x["k"], x["v"], recipe="fa2-bf16", backward=True, do=x["do"], causal=True)
    folder = tmp_path_factory.mktemp("results")
    rs.write(folder / "a.safetensors", {**x, "o": kernel["o"], "dq": kernel["dq"], "lse": kernel["lse"]},
             {"recipe": "fa2-bf16", "causal": "true"})
    return x, folder


CALLS = {
    "pcollapse synthetic": (lambda x, f: rs.pcollapse(synthetic=True, n=64, d=16), results.PcollapseResult),
    "pcollapse without_sink sweep": (lambda x, f: rs.pcollapse({n: x[n] for n in "qkv"}, without_sink=True,
                                                               sweep_scale=True), results.PcollapseResult),
    "leak": (lambda x, f: rs.leak(synthetic=True, n=64, d=16), results.LeakResult),
    "leak fix file": (lambda x, f: rs.leak(f, fix=True), results.LeakResult),
    "headroom": (lambda x, f: rs.headroom(f), results.HeadroomResult),
    "bias": (lambda x, f: rs.bias(f), results.BiasResult),
    "bias steps fix": (lambda x, f: rs.bias(synthetic=True, n=64, d=16, steps=2, fix=True), results.BiasResult),
    "bias files": (lambda x, f: rs.bias([f, f]), results.BiasResult),
    "attribute": (lambda x, f: rs.attribute(f, recipe="fa3-fp8"), results.AttributeResult),
    "compare": (lambda x, f: rs.compare(f, "fa2-bf16"), results.CompareResult),
    "compare tolerance": (lambda x, f: rs.compare(f, "fa2-bf16", rtol=0.01, atol=0.0), results.CompareResult),
    "fit": (lambda x, f: rs.fit(f, presets=["fa2-bf16"], keys=["kv_order"], max_evaluations=4), results.FitResult),
    "check": (lambda x, f: rs.check(f.parent), results.CheckResult),
    "compare_rules": (lambda x, f: rs.mx.compare_rules(x["q"], "mxfp4", block=16), results.CompareRulesResult),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_every_key_is_declared_and_every_declared_key_is_there(dump, name):
    x, folder = dump
    call, cls = CALLS[name]
    check(call(x, folder / "a.safetensors"), cls, name)


def test_the_functions_name_their_result_types():
    for function, cls in [(rs.pcollapse, "PcollapseResult"), (rs.leak, "LeakResult"), (rs.bias, "BiasResult"),
                          (rs.headroom, "HeadroomResult"), (rs.attribute, "AttributeResult"),
                          (rs.compare, "CompareResult"), (rs.check, "CheckResult"), (rs.fit, "FitResult"),
                          (rs.mx.compare_rules, "CompareRulesResult")]:
        assert typing.get_type_hints(function)["return"] is getattr(results, cls), function.__name__


def test_an_undeclared_key_fails_the_check():
    with pytest.raises(AssertionError):
        check({"format": "mxfp4", "block": 32, "tensors": [], "extra": 1}, results.CompareRulesResult, "x")
    with pytest.raises(AssertionError):
        check({"format": "mxfp4", "block": 32}, results.CompareRulesResult, "x")

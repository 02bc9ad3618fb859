"""Kernel CI from pytest: a kernel's outputs held against a recipe's emulation of the same
inputs, in memory, with the tolerances `roundscope check` takes (every bit when none is given).

    import roundscope.testing
    out = my_flash_forward(q, k, v)                       # the kernel under test
    roundscope.testing.assert_matches({"o": out.o, "lse": out.lse}, q, k, v, recipe="fa2-bf16",
                                      min_match=0.999, max_row_ulp=2)

An output that fails raises AssertionError naming it, how many elements differ, the furthest
element with its index and the kernel's, the recipe's and the truth's values, NaN or Inf where the
truth is finite, and sign flips near zero."""
from __future__ import annotations

import math
from collections.abc import Mapping

from . import ArrayLike, compare, results

__all__ = ["assert_matches"]

# The outputs a kernel writes, in the order they are reported.
OUTPUTS = ("o", "lse", "dq", "dk", "dv")


def _ulp_text(ulp: object) -> str:
    return "NaN against a number" if ulp is None else f"{ulp} ulp"


def _failure(name: str, x: results.CompareOutput, exact: bool, max_ulp: int | None, max_row_ulp: float | None,
             min_match: float | None, close: bool) -> str:
    """Why output `name` fails, in one line; empty when it passes (the criteria of `check`)."""
    matched, total = x["matched"], x["total"]
    share = matched / total if total else 1.0
    ulp, row_ulp = x["max_ulp"], float(x["max_row_ulp"])
    if exact:
        passed = matched == total
    else:
        passed = ((max_ulp is None or (ulp is not None and int(ulp) <= max_ulp))
                  and (max_row_ulp is None or row_ulp <= max_row_ulp)
                  and (min_match is None or share >= min_match)
                  and (not close or x.get("outside_tolerance", 0) == 0))
    if passed:
        return ""
    why = (f"{name}: {total - matched} of {total} elements differ ({100 * share:.4f} % equal), "
           f"max {_ulp_text(ulp)} ({row_ulp:.3g} of its row's scale)")
    if x.get("outside_tolerance"):
        why += f", {x['outside_tolerance']} outside rtol and atol"
    d = x["largest_difference"]
    if d is not None:
        why += (f"; furthest at {list(d['index'])}: kernel {d['kernel']} recipe {d['recipe']} "
                f"(truth {d['truth']})")
    n = x["nonfinite"]
    if n:
        first = x["first_nonfinite"]
        where = f", the first at {list(first['index'])}" if first is not None else ""
        why += f"; {n} NaN or Inf where the truth is finite{where}"
    if x["sign_flips_near_zero"]:
        why += f"; {x['sign_flips_near_zero']} sign flip(s) near zero"
    return why


def _check_tolerance(name: str, value: float | None, low: float, high: float) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name}: expected a number, not {type(value).__name__}")
    if not (math.isfinite(value) and low <= value <= high):
        raise ValueError(f"{name}: {value} is not a number in [{low:g}, {high:g}]")


def assert_matches(outputs: Mapping[str, ArrayLike], q: ArrayLike, k: ArrayLike, v: ArrayLike, *,
                   recipe: str = "fa2-bf16", settings: Mapping[str, object] | None = None, causal: bool = False,
                   softmax_scale: float | None = None, do: ArrayLike = None, attn_mask: ArrayLike = None,
                   max_ulp: int | None = None, max_row_ulp: float | None = None, min_match: float | None = None,
                   rtol: float | None = None, atol: float | None = None,
                   threads: int = 0) -> results.CompareResult:
    """Asserts that a kernel's `outputs` ({"o", "lse", "dq", "dk", "dv"}: any of them, in the
    dtypes the recipe writes; the gradients need `do`) match `recipe`'s emulation of q, k, v.

    With no tolerance, every bit. Otherwise each output passes where every tolerance given holds:
    max_ulp (no element further from the recipe's, in ulps of its dtype), max_row_ulp (in ulps
    of its row's largest value: a value near zero whose sign flipped counts for what it is),
    min_match (the share of bit patterns equal), rtol with atol (|kernel - recipe| <= atol +
    rtol |recipe|, torch.testing.assert_close). Returns the comparison (`roundscope compare
    --json`); raises AssertionError with one line per failing output."""
    if not isinstance(outputs, Mapping) or not outputs:
        raise TypeError("outputs: expected a mapping of output names (o, lse, dq, dk, dv) to arrays")
    unknown = [n for n in outputs if n not in OUTPUTS]
    if unknown:
        raise ValueError(f"outputs: {unknown[0]!r} is not a kernel output (o, lse, dq, dk, dv)")
    if max_ulp is not None and (isinstance(max_ulp, bool) or not isinstance(max_ulp, int) or max_ulp < 0):
        raise ValueError(f"max_ulp: {max_ulp!r} is not a count of ulps (an integer, 0 or more)")
    _check_tolerance("max_row_ulp", max_row_ulp, 0.0, math.inf)
    _check_tolerance("min_match", min_match, 0.0, 1.0)
    _check_tolerance("rtol", rtol, 0.0, math.inf)
    _check_tolerance("atol", atol, 0.0, math.inf)
    if (rtol is None) != (atol is None):
        raise TypeError("rtol and atol: give both (as torch.testing.assert_close takes them) or neither")
    arrays: dict[str, ArrayLike] = {"q": q, "k": k, "v": v}
    if do is not None:
        arrays["do"] = do
    if attn_mask is not None:
        arrays["attn_mask"] = attn_mask
    arrays.update(outputs)
    names = [n for n in OUTPUTS if n in outputs]
    result = compare(arrays, recipe, settings=settings, causal=causal, softmax_scale=softmax_scale, outputs=names,
                     rtol=rtol, atol=atol, threads=threads)
    exact = max_ulp is None and max_row_ulp is None and min_match is None and rtol is None
    failures = [why for n in names
                if (why := _failure(n, result["outputs"][n], exact, max_ulp, max_row_ulp, min_match,
                                    rtol is not None))]
    if failures:
        wanted = "every bit" if exact else ", ".join(
            f"{key} {value}" for key, value in (("max_ulp", max_ulp), ("max_row_ulp", max_row_ulp),
                                                ("min_match", min_match), ("rtol", rtol), ("atol", atol))
            if value is not None)
        raise AssertionError(f"the kernel's outputs do not match recipe {recipe} ({wanted}):\n  "
                             + "\n  ".join(failures))
    return result

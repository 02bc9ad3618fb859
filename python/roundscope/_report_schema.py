"""What report.json and its layer files must hold for the page and TensorBoard writers to read
them, checked field by field before either draws anything: a shared report.json may have been
edited by hand. A field that is not what `roundscope report` writes is a ReportError naming the
file and the field (the writers' one-line error, exit 2). Keys the readers do not use are not
checked; a value they only show (a name, an option) is any JSON and is escaped where shown.
"""
from __future__ import annotations

import os
import re
import sys

# Counts, indices and steps: what the report writes as unsigned 64-bit integers.
_LARGEST = 2**64 - 1
# ulp_histogram's bucket labels (analysis/kernel_compare.cpp): "0", "1", "2-3", ..., "nan".
_PLAIN_KEY = re.compile(r"[\w.+-]{1,64}", re.ASCII)
ULP_LABEL = re.compile(r"0|1|[0-9]{1,20}-[0-9]{1,20}|nan")


# A head's profile (analysis/collapse_model.hpp): pcollapse's histograms, PROFILE_BINS counts each.
PROFILE_KEYS = ("score_gap_histogram", "p_binade_histogram")
PROFILE_BINS = 41
POSITION_BINS = 16  # and its sink mass by query position in as many bins


class ReportError(ValueError):
    """A report file that is not what `roundscope report` writes; the message names the field."""


def one_line(e: BaseException) -> str:
    """An error as one line of at most 400 characters (an OSError names its file)."""
    text = " ".join(str(e).split())
    return text if len(text) <= 400 else text[:397] + "..."


def refuse(program: str, message) -> None:
    """The writers' refusal, as the command line's: one line on standard error, exit 2."""
    print(f"{program}: {one_line(message)}", file=sys.stderr)
    sys.exit(2)


def _fail(where, what):
    raise ReportError(f"{where}: {what}")


def _dict(x, where):
    if not isinstance(x, dict):
        _fail(where, "is not a JSON object")
    return x


def _list(x, where):
    if not isinstance(x, list):
        _fail(where, "is not a list")
    return x


def _str(x, where):
    if not isinstance(x, str):
        _fail(where, "is not a string")
    return x


def _count(x, where, minimum=0):
    if isinstance(x, bool) or not isinstance(x, int) or not minimum <= x <= _LARGEST:
        _fail(where, f"is not an integer from {minimum} to 2^64 - 1")
    return x


def _at(where, key) -> str:
    """The name of where[key] in a message: FILE: key, then .key or [i] within it."""
    if isinstance(key, int):
        return f"{where}[{key}]"
    if not _PLAIN_KEY.fullmatch(key):  # a key from the file is shown as data, controls escaped
        key = repr(key)[:80]
    return f"{where} {key}" if where.endswith(":") else f"{where}.{key}"


def _int64(x, where):
    """A layer or a step: the dump's metadata as a signed 64-bit integer, or null (none given)."""
    if x is not None and (isinstance(x, bool) or not isinstance(x, int) or not -2**63 <= x < 2**63):
        _fail(where, "is not a 64-bit integer or null")
    return x


def _where_and_when(obj, where):
    _optional(obj, "layer", _int64, where)
    _optional(obj, "step", _int64, where)


def _histogram(x, where):
    """PROFILE_BINS counts."""
    if len(_list(x, where)) != PROFILE_BINS:
        _fail(where, f"does not hold {PROFILE_BINS} counts")
    for i, count in enumerate(x):
        _count(count, _at(where, i))


def _share_or_none(x, where):
    """A share in [0, 1], or null or "nan" (no row measured)."""
    if x is None or x == "nan":
        return None
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not 0 <= x <= 1:
        _fail(where, "is not a share from 0 to 1, null or \"nan\"")
    return x


def _by_position(p, where):
    """pcollapse's sink mass by query position: POSITION_BINS shares (or none), counts, starts."""
    for key, check in (("sink_mass_by_position", _share_or_none), ("rows_by_position", _count),
                       ("position_bins", _count)):
        if len(_list(p.get(key), _at(where, key))) != POSITION_BINS:
            _fail(_at(where, key), f"does not hold {POSITION_BINS} values")
        for i, x in enumerate(p[key]):
            check(x, _at(_at(where, key), i))


def _collapsing_rows(x, where):
    """pcollapse's most collapsing rows: row, keys and counted as counts (counted at most keys)."""
    for i, row in enumerate(_list(x, where)):
        at = _at(where, i)
        _dict(row, at)
        if _count(row.get("counted"), _at(at, "counted")) > _count(row.get("keys"), _at(at, "keys")):
            _fail(_at(at, "counted"), "is more than keys")
        _count(row.get("row"), _at(at, "row"))
        _share_or_none(row.get("sink_mass"), _at(at, "sink_mass"))


def _figure(x, where):
    """A JSON number, or "nan", "inf", "-inf" (how the report writes those)."""
    if x in ("nan", "inf", "-inf"):
        return x
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        _fail(where, "is not a number, \"nan\", \"inf\" or \"-inf\"")
    return x


def _compare_worst(x, where):
    """A head's own worst elements, per recipe and output: {"matched", "total", "worst": [{"index",
    "kernel", "truth", "recipe", "ulp"}]}."""
    for recipe, outputs in _dict(x, where).items():
        for name, o in _dict(outputs, _at(where, recipe)).items():
            at = _at(_at(where, recipe), name)
            if _count(_dict(o, at).get("matched"), _at(at, "matched")) > _count(o.get("total"), _at(at, "total")):
                _fail(_at(at, "matched"), "is more than total")
            for i, w in enumerate(_list(o.get("worst"), _at(at, "worst"))):
                element = _at(_at(at, "worst"), i)
                _dict(w, element)
                for k, c in enumerate(_list(w.get("index"), _at(element, "index"))):
                    _count(c, _at(_at(element, "index"), k))
                for key in ("kernel", "truth", "recipe"):
                    _figure(w.get(key), _at(element, key))
                if w.get("ulp") is not None:
                    _count(w.get("ulp"), _at(element, "ulp"))


def _optional(obj, key, check, where, *args):
    if key in obj:
        check(obj[key], _at(where, key), *args)


def _required(obj, key, where):
    """obj[key] (obj itself where key is None), which must not be null."""
    x = obj if key is None else obj.get(key)
    if x is None:
        _fail(where if key is None else _at(where, key), "is missing or null")
    return x


def _items(obj, key, where):
    """obj[key] as a list of JSON objects (an absent key is an empty list)."""
    items = _at(where, key)
    return [(_dict(x, _at(items, i)), _at(items, i)) for i, x in enumerate(_list(obj.get(key, []), items))]


def _utf8(text: str) -> bool:
    """Whether text is Unicode that UTF-8 can write (JSON's \\ud800 escapes a lone surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def layer_path(report_path: str, name, where: str) -> str:
    """Where a layer file named in report.json is: a relative path inside the report's folder
    (the report writes layers/layerN.json), never outside it, a link out of it included."""
    _str(name, where)
    parts = name.split("/")
    if not name or "\0" in name or not _utf8(name) or os.path.isabs(name) or ".." in parts or "" in parts:
        _fail(where, f"{name!r} is not a file inside the report's folder")
    folder = os.path.dirname(os.path.abspath(report_path))
    path = os.path.join(folder, name)
    if os.path.commonpath([os.path.realpath(path), os.path.realpath(folder)]) != os.path.realpath(folder):
        _fail(where, f"{name!r} leads out of the report's folder")
    return path


def check_report(report, path: str) -> None:
    """report.json's own fields the readers use."""
    _dict(report, path)
    top = f"{path}:"
    options = _dict(report.get("options", {}), _at(top, "options"))
    for recipe, where in _items(options, "recipes", _at(top, "options")):
        _str(recipe.get("name"), _at(where, "name"))
    for f, where in _items(report, "files", top):
        _str(f.get("file"), _at(where, "file"))
        _where_and_when(f, where)
        _optional(f, "batch", _count, where, 1)
        _optional(f, "heads_per_batch", _count, where, 1)
    for layer, where in _items(report, "layers", top):
        layer_path(path, layer.get("file"), _at(where, "file"))
    for series, where in _items(report, "bias_over_steps", top):
        _int64(_required(series, "layer", where), _at(where, "layer"))
        _count(series.get("head"), _at(where, "head"))
        steps = _list(series.get("steps"), _at(where, "steps"))
        for i, s in enumerate(steps):
            _int64(_required(s, None, _at(_at(where, "steps"), i)), _at(_at(where, "steps"), i))
        if len(_list(series.get("cumulative"), _at(where, "cumulative"))) != len(steps):
            _fail(_at(where, "cumulative"), "is not one value a step")


def check_layer(content, path: str) -> None:
    """A layer file's heads and comparisons."""
    _dict(content, path)
    top = f"{path}:"
    for head, where in _items(content, "heads", top):
        _str(head.get("file"), _at(where, "file"))
        _count(head.get("head"), _at(where, "head"))
        _where_and_when(head, where)
        _optional(head, "sampling_error", _dict, where)
        if isinstance(head.get("pcollapse"), dict):
            p, at = head["pcollapse"], _at(where, "pcollapse")
            for key in PROFILE_KEYS:
                _optional(p, key, _histogram, at)
            if "sink_mass_by_position" in p:
                _by_position(p, at)
            _optional(p, "collapsing_rows", _collapsing_rows, at)
        _optional(head, "compare_worst", _compare_worst, where)
    for c, where in _items(content, "compare", top):
        _str(c.get("file"), _at(where, "file"))
        _where_and_when(c, where)
        _optional(c, "sampling_error", _dict, where)
        for recipe, x in _dict(c.get("compare", {}), _at(where, "compare")).items():
            at = _at(_at(where, "compare"), recipe)
            if "skipped" in _dict(x, at):
                continue
            for name, o in _dict(x.get("outputs"), _at(at, "outputs")).items():
                out = _at(_at(at, "outputs"), name)
                _dict(o, out)
                if _count(o.get("matched"), _at(out, "matched")) > _count(o.get("total"), _at(out, "total")):
                    _fail(_at(out, "matched"), "is more than total")
                for b, bucket in _items(o, "ulp_histogram", out):
                    if not ULP_LABEL.fullmatch(_str(b.get("ulps"), _at(bucket, "ulps"))):
                        _fail(_at(bucket, "ulps"), "is not a bucket of ulps ('0', '1', '2-3', ..., 'nan')")
                    _count(b.get("count"), _at(bucket, "count"))

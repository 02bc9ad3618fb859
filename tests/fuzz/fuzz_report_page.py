"""Fuzzes the report page writer and the TensorBoard exporter (roundscope._report_page,
roundscope._report_tensorboard) with hand-edited reports: an input is one JSON document,
{"report": report.json, "layers": {file name: layer file}}, mutated field by field from real
reports (tests/fuzz/seeds/report_page, written by `roundscope report`).

    PYTHONPATH=build/python .venv/bin/python tests/fuzz/fuzz_report_page.py [libFuzzer options] CORPUS SEEDS

A finding is any of:
  - reading the report raises anything but ReportError or OSError (the writers' one-line exit 2);
  - a report that reads draws a page or events with an exception;
  - the page holds markup the writer does not write: an element outside its template's, an
    attribute outside its template's or a link that is not to an anchor, a script loaded from
    anything but its library's name beside it, more scripts than its four, a chart string with
    '<' or '>' in it (Plotly draws a subset of HTML), or a '<', '>' or '&' in the per-head view's
    data.
"""
from __future__ import annotations

import atexit
import json
import os
import re
import shutil
import sys
import tempfile

import atheris

sys.path.insert(0, os.path.dirname(__file__))
from json_mutator import custom_mutator  # noqa: E402

with atheris.instrument_imports(include=["roundscope"]):
    from roundscope import _report_metrics as rm
    from roundscope import _report_page, _report_tensorboard
    from roundscope._report_schema import ReportError

ELEMENTS = {"html", "head", "meta", "title", "style", "script", "body", "h1", "h2", "h3", "p", "nav", "ul", "li", "a",
            "div", "table", "thead", "tbody", "tr", "th", "td", "details", "summary", "b", "span", "code", "select",
            "option", "aside", "button"}
ATTRIBUTES = {"lang", "charset", "id", "class", "href", "title", "data-v", "type", "src", "defer", "value",
              "data-layer", "hidden", "data-sampled", "data-plotly"}
SCRIPTS = 4  # the charts, the per-head view's figures and profiles, the page's own (which loads Plotly's)
DATA = re.compile(r'<script type="application/json" id="(?:head-metrics|head-profiles)">(.*?)</script>', re.S)
LIBRARY = "plotly-fuzz.min.js"  # the one script a page loads (its body's data-plotly), from beside it
WORK = tempfile.mkdtemp(prefix="roundscope-fuzz-page-")
atexit.register(shutil.rmtree, WORK, True)


TAG = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9-]*)((?:\s+[^\s=>]+(?:=\"[^\"<>]*\")?)*)\s*(/?)>")
ATTRIBUTE = re.compile(r'\s+([^\s=>]+)(?:="([^"]*)")?')
CHARTS = re.compile(r'<script type="application/json" id="charts">(.*?)</script>', re.S)


def page_problems(page: str) -> list[str]:
    """What a page holds that its template does not write. Every '<' of the page opens a tag
    (the charts' JSON escapes its strings, and the fuzzer draws without Plotly's script)."""
    doctype = "<!DOCTYPE html>"
    if not page.startswith(doctype):
        return ["no doctype first"]
    problems, scripts, at = [], 0, len(doctype)
    for m in TAG.finditer(page, at):
        if "<" in page[at:m.start()]:
            problems.append(f"a '<' that opens no tag: {page[at:m.start()][:80]!r}")
        at = m.end()
        closing, tag, attributes = m.group(1), m.group(2).lower(), m.group(3)
        if tag not in ELEMENTS:
            problems.append(f"element <{tag}>")
        scripts += tag == "script" and not closing
        for name, value in ATTRIBUTE.findall(attributes):
            if name.lower() not in ATTRIBUTES:
                problems.append(f"attribute {name}= on <{tag}>")
            if name.lower() == "href" and not value.startswith("#"):
                problems.append(f"link to {value!r}")
            if name.lower() == "src" or name.lower() == "data-plotly" and (tag != "body" or value != LIBRARY):
                problems.append(f"<{tag}> loads {value!r}")
    if "<" in page[at:]:
        problems.append(f"a '<' that opens no tag: {page[at:][:80]!r}")
    if scripts != SCRIPTS:
        problems.append(f"{scripts} scripts, not {SCRIPTS}")
    problems += [f"'<', '>' or '&' in the view's data: {d[:60]!r}" for d in DATA.findall(page) if set("<>&") & set(d)]
    charts = CHARTS.search(page)
    if charts is None:
        return problems + ["no charts"]
    problems += [f"chart string {s[:60]!r}" for s in strings_in(json.loads(charts.group(1))) if "<" in s or ">" in s]
    return problems


class Discarded:
    """TensorBoard's event writer, without the file: the events are made (a step past int64 fails
    there, as in the file) and dropped."""

    def add_event(self, event):
        event.SerializeToString()

    def close(self):
        pass


class Events(_report_tensorboard.Events):
    def __init__(self, logdir):
        from tensorboard.compat.proto import event_pb2, summary_pb2

        self.event_pb2, self.summary_pb2 = event_pb2, summary_pb2
        self.writer, self.wall_time, self.count = Discarded(), 0.0, 0


_report_tensorboard.Events = Events


def strings_in(x):
    if isinstance(x, str):
        yield x
    elif isinstance(x, dict):
        for v in x.values():
            yield from strings_in(v)
    elif isinstance(x, list):
        for v in x:
            yield from strings_in(v)


def write_report(doc) -> str | None:
    """The document as report.json and its layer files in a fresh folder; None where it is not
    one (a name that is not a plain relative path is not written, the report may still name it)."""
    shutil.rmtree(WORK, ignore_errors=True)
    folder = os.path.join(WORK, "r")
    os.makedirs(folder)
    if not isinstance(doc, dict) or "report" not in doc:
        return None
    for name, content in (doc.get("layers") or {}).items() if isinstance(doc.get("layers"), dict) else ():
        parts = name.split("/")
        if not name or "\0" in name or name.startswith("/") or ".." in parts or "" in parts or "." in parts:
            continue
        path = os.path.join(folder, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if not os.path.isdir(path):
            with open(path, "w", encoding="utf-8", errors="surrogatepass") as f:
                f.write(json.dumps(content, allow_nan=True))  # dumps: the C encoder
    path = os.path.join(folder, "report.json")
    with open(path, "w", encoding="utf-8", errors="surrogatepass") as f:
        f.write(json.dumps(doc["report"], allow_nan=True))
    return path


def test_one_input(data: bytes) -> bool:
    """Whether the input read as a report (and then drew and exported)."""
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError):
        doc = None
    path = write_report(doc)
    if path is None:
        return False
    try:
        read = rm.read_report(path)
    except (ReportError, OSError):
        return False
    page = _report_page.Page(*read).render(LIBRARY)
    page.encode("utf-8")  # as the writer writes it
    problems = page_problems(page)
    if problems:
        raise AssertionError("the page holds markup its template does not: " + "; ".join(problems[:5]))
    _report_tensorboard.export(*read, os.path.join(WORK, "tb"), per_head=True)
    return True


def main():
    seeds = os.path.join(os.path.dirname(__file__), "seeds", "report_page")
    with open(os.path.join(seeds, "whole.json"), encoding="utf-8") as f:
        seed = json.load(f)
    if not test_one_input(json.dumps(seed).encode()):
        sys.exit(f"{seeds}/whole.json does not read as a report: the seeds are out of date")
    atheris.Setup(sys.argv, test_one_input, custom_mutator=custom_mutator(seed))
    atheris.Fuzz()


if __name__ == "__main__":
    main()

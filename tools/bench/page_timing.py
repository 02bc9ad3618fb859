"""When the report page draws, on the wall clock: headless Chromium driven over its DevTools pipe
(no virtual time, whose clock is not the wall clock), the page's own timings read from its body.

    python tools/bench/page_timing.py OUT/report.html [--runs 3] [--all] [--size 1280,1000]

Prints, per run, the body's data-paint-ms (first text painted), data-screen-ms (the first screen
drawn: its heat maps and any Plotly chart on it), data-plotly-ms (Plotly's script run: the
charts can draw) and, with --all (the page opened with ?draw=all, every chart drawn at once),
data-draw-ms (every Plotly chart drawn), each from the page's navigation start
(performance.now()).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time


class Browser:
    """Chromium with --remote-debugging-pipe: commands on its fd 3, answers on its fd 4, each a
    JSON message ended by a NUL byte."""

    def __init__(self, size):
        binary = shutil.which("chromium") or shutil.which("chromium-browser")
        if binary is None:
            sys.exit("page_timing: no chromium on PATH")
        to_browser, self.commands = os.pipe()
        self.answers, from_browser = os.pipe()
        self.profile = tempfile.mkdtemp(prefix="page-timing-")
        # the browser reads fd 3 and writes fd 4
        self.process = subprocess.Popen(
            [binary, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", f"--window-size={size}",
             "--remote-debugging-pipe", f"--user-data-dir={self.profile}", "about:blank"],
            pass_fds=(3, 4), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=lambda: (os.dup2(to_browser, 3), os.dup2(from_browser, 4)))
        os.close(to_browser), os.close(from_browser)
        self.next_id, self.buffer = 0, b""

    def send(self, method, params=None, session=None):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self.commands, json.dumps(message).encode() + b"\0")
        while True:
            while b"\0" not in self.buffer:
                chunk = os.read(self.answers, 1 << 16)
                if not chunk:
                    raise RuntimeError("the browser closed its pipe")
                self.buffer += chunk
            raw, self.buffer = self.buffer.split(b"\0", 1)
            answer = json.loads(raw)
            if answer.get("id") == self.next_id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer["result"]

    def close(self):
        self.process.kill()
        self.process.wait()
        shutil.rmtree(self.profile, ignore_errors=True)


def body_timings(browser, url, wanted, timeout=30.0):
    target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    browser.send("Page.navigate", {"url": url}, session)
    end = time.monotonic() + timeout
    data = {}
    while time.monotonic() < end:
        expression = "document.body?JSON.stringify(document.body.dataset):''"
        value = browser.send("Runtime.evaluate", {"expression": expression,
                                                  "returnByValue": True}, session)["result"].get("value")
        data = json.loads(value) if value else {}
        if all(k in data for k in wanted) or "errors" in data:
            break
        time.sleep(0.05)
    browser.send("Target.closeTarget", {"targetId": target})
    return data


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("page")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--all", action="store_true", help="open with ?draw=all and wait for every chart")
    parser.add_argument("--size", default="1280,1000")
    a = parser.parse_args(argv)
    if not os.path.isfile(a.page):
        sys.exit(f"page_timing: {a.page}: no such file")
    url = "file://" + os.path.abspath(a.page) + ("?draw=all" if a.all else "")
    wanted = ["paintMs", "screenMs", "plotlyMs"] + (["drawMs"] if a.all else [])
    browser = Browser(a.size)
    try:
        for run in range(a.runs):
            data = body_timings(browser, url, wanted)
            figures = ", ".join(f"{k} {data.get(k, 'none')}" for k in wanted)
            print(f"run {run + 1}: {figures}; charts {data.get('drawn', 0)}/{data.get('charts', '?')}"
                  + (f"; errors {data['errors']}" if "errors" in data else ""))
    finally:
        browser.close()


if __name__ == "__main__":
    main(sys.argv[1:])

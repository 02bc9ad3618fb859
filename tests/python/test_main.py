"""`python -m roundscope ARGS...` (roundscope/__main__.py, also the wheel's `roundscope` command)
is the executable's command line: the same output byte for byte, the same one-line messages and
the same exit codes, on success, on a bad option, on a check that fails and on a closed pipe."""
import os
import subprocess
import sys

import pytest

from conftest import ROOT

CLI = os.environ.get("ROUNDSCOPE_CLI", str(ROOT / "build" / "roundscope"))
ENV = dict(os.environ)


def both(*args, **kw):
    """The executable's and `python -m roundscope`'s (returncode, stdout, stderr)."""
    native = subprocess.run([CLI, *args], capture_output=True, text=True, timeout=120, **kw)
    module = subprocess.run([sys.executable, "-m", "roundscope", *args], capture_output=True, text=True,
                            timeout=120, env=ENV, **kw)
    return (native.returncode, native.stdout, native.stderr), (module.returncode, module.stdout, module.stderr)


@pytest.mark.parametrize("args", [
    ["formats", "--json"],
    ["cast", "0.1", "--to", "bf16"],
    ["recipes", "--markdown"],
    ["headroom", "--synthetic", "--n", "64", "--d", "16", "--json"],
])
def test_the_same_output_byte_for_byte(args):
    native, module = both(*args)
    assert native[0] == 0 and module == native


@pytest.mark.parametrize("args, code", [
    (["cast", "0.1", "--to", "e9m9"], 2),        # an unknown format
    (["cast", "--no-such-flag"], 2),             # an unknown option
    (["no-such-command"], 2),
    ([], 2),                                     # no command
])
def test_the_same_message_and_exit_code(args, code):
    native, module = both(*args)
    assert native[0] == code and module == native


def test_a_closed_pipe_ends_it_as_it_ends_the_executable():
    # `roundscope formats | head -1`: both end on SIGPIPE or exit quietly, neither prints a traceback.
    for command in ([CLI], [sys.executable, "-m", "roundscope"]):
        p = subprocess.run(" ".join(command) + " formats | head -c 1 > /dev/null; echo ${PIPESTATUS[0]}",
                           shell=True, executable="/bin/bash", capture_output=True, text=True, timeout=120, env=ENV)
        assert "Traceback" not in p.stderr, p.stderr
        assert p.stdout.strip() in ("0", "141"), (command, p.stdout, p.stderr)

"""Commands run in this process (cli/run_in_process.hpp), for the calls not yet in the library's
typed API (the analyses are: python/module/analyses.cpp): a Python call becomes the command
line it mirrors, so that it is checked, computed and reported exactly as
`roundscope COMMAND ... --json` would be; arrays are handed over as in-memory files."""
from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping, Sequence

from . import _arrays, _core

# The names under which in-memory files appear in arguments and in error messages.
INPUT = "<arrays>"
OUTPUT = "<output>"


def _value(key: str, v) -> str:
    if isinstance(v, bool):
        raise TypeError(f"{key}: expected a number, not a bool")
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else str(v)
    return str(v)


# The options that are switches (True: the flag alone); any other takes a value, and a bool given
# for it is an error naming the argument (n=True must not become "--n" and swallow the next flag).
SWITCHES = frozenset({"backward", "intermediates", "reference", "truth", "single_level", "no_html",
                      "tensorboard_heads"})


def flags(**options) -> list[str]:
    """Keyword options as the command's flags: k_sink=4 -> --k-sink 4; a switch True -> --flag;
    None and a switch False -> nothing; a sequence -> the option repeated; settings={k: v} ->
    --set k=v; causal=True/False -> --causal/--no-causal (None: the file's metadata decides)."""
    out: list[str] = []
    for key, v in options.items():
        name = "--" + key.replace("_", "-")
        if isinstance(v, bool) and key not in SWITCHES and key != "causal":
            raise TypeError(f"{key}: expected a number or a name, not {v}")
        if key == "causal":
            if v is not None:
                out.append("--causal" if v else "--no-causal")
        elif key == "settings":
            if v is None:
                continue
            if not isinstance(v, Mapping):
                raise TypeError("settings: expected a mapping of recipe keys to values")
            for k, x in v.items():
                out += ["--set", f"{k}={str(x).lower() if isinstance(x, bool) else x}"]
        elif v is None or v is False:
            continue
        elif v is True:
            out.append(name)
        elif isinstance(v, (list, tuple)):
            for x in v:
                out += [name, _value(key, x)]
        else:
            out += [name, _value(key, v)]
    return out


def input_arguments(inputs, what: str = "inputs", by_name: bool = False) -> tuple[list[str], dict]:
    """A path stays a path; a mapping of arrays becomes an in-memory file (several: <arrays 1>, ...).
    by_name: the arrays are a function's own arguments (q, k, v), named alone in messages."""
    many = isinstance(inputs, Sequence) and not isinstance(inputs, (str, bytes))
    items = list(inputs) if many else [inputs]
    args, files = [], {}
    for i, x in enumerate(items):
        if _arrays.is_path(x):
            args.append(os.fsdecode(x))
        else:
            name = INPUT if len(items) == 1 else f"<arrays {i + 1}>"
            files[name] = _arrays.tensors_in(x, what, by_name)
            args.append(name)
    return args, files


# A flag in a command's message: "--k-sink", "--no-causal", "--set".
_FLAG = re.compile(r"(?<![\w-])--(?:no-)?([a-z][a-z0-9]*(?:-[a-z0-9]+)*)")


# The flags whose keyword is not the flag's own name.
_ARGUMENT_OF_FLAG = {"set": "settings", "round": "rounding", "from": "presets"}


def python_message(message: str) -> str:
    """A command's message in the words of the Python call that ran it: every flag becomes the
    keyword argument that gave it (--k-sink -> k_sink, --no-causal -> causal, --set -> settings,
    --round -> rounding), since flags() spells each keyword as its flag."""
    message = _FLAG.sub(lambda m: _ARGUMENT_OF_FLAG.get(m.group(1), m.group(1).replace("-", "_")), message)
    # The arrays went in as an in-memory file: a tensor of it is the argument of its name.
    message = re.sub(r"<arrays(?: \d+)?>: (?:\w+: )?tensor '(\w+)'", r"\1:", message)
    return re.sub(r"<arrays(?: \d+)?>", "inputs", message)


def run(args: list[str], files: dict | None = None, outputs: Sequence[str] = ()) -> tuple[int, dict, dict]:
    """(exit code, parsed JSON, {output: ({tensor: array}, metadata)}). A ValueError or TypeError
    names the Python argument, not the flag it became. Every command runs with --json, whose
    result comes back here: a library call prints nothing."""
    assert "--json" in args, args  # without it a command prints its human summary to stdout
    try:
        code, text, written = _core.run(args, files or {}, list(outputs))
    except (ValueError, TypeError) as e:
        raise type(e)(python_message(str(e))) from None
    if text is None:  # every command prints its result with --json, failing or not
        raise RuntimeError(f"roundscope {args[0]} printed no JSON result (exit code {code})")
    result = json.loads(text)
    return code, result, {k: (_arrays.tensors_out(t), m) for k, (t, m) in written.items()}

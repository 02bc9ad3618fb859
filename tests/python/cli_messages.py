"""The command line's messages in the words of the Python calls that mirror them: the tests
compare a Python call's message with the command's on the same input, flag for argument."""
import re

# A flag in a command's message: "--k-sink", "--no-causal", "--set".
_FLAG = re.compile(r"(?<![\w-])--(?:no-)?([a-z][a-z0-9]*(?:-[a-z0-9]+)*)")

# The flags whose keyword is not the flag's own name.
_ARGUMENT_OF_FLAG = {"set": "settings", "round": "rounding", "from": "presets"}


def python_message(message: str) -> str:
    """Every flag as the keyword argument that carries it (--k-sink -> k_sink, --no-causal ->
    causal, --set -> settings, --round -> rounding); a file's tensor, where the arrays were the
    call's own arguments, as the argument of its name ("FILE: tensor 'q' ..." -> "q: ...", with
    the file given as <arrays>), any other mention of the arrays as "inputs"."""
    message = _FLAG.sub(lambda m: _ARGUMENT_OF_FLAG.get(m.group(1), m.group(1).replace("-", "_")), message)
    message = re.sub(r"<arrays(?: \d+)?>: (?:\w+: )?tensor '(\w+)'", r"\1:", message)
    return re.sub(r"<arrays(?: \d+)?>", "inputs", message)

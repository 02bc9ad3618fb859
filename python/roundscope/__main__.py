"""`python -m roundscope ARGS...` and the `roundscope` command a pip install puts on the PATH:
the command line of docs/cli.md, run by the package's compiled core, with the executable's
output, messages and exit codes."""
from __future__ import annotations

import signal
import sys

from . import _core


def main(argv: list[str] | None = None) -> int:
    """Runs `roundscope ARGV...` and returns its exit code."""
    args = sys.argv[1:] if argv is None else list(argv)
    sys.stdout.flush()
    sys.stderr.flush()
    # As the executable: Ctrl-C and a closed pipe end the command (Python would hold both until
    # the core returned, minutes later for a report).
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    return int(_core.main(args))


if __name__ == "__main__":
    sys.exit(main())

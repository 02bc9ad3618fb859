"""What the kit's scripts share: the command line's contract (a bad option or input is one line on
standard error, exit 2, nothing written), whether an output is one of the inputs (however it is
spelled or linked), and writing an output whole (a temporary file of its own beside it, renamed
over it, so that a full disk or a stop leaves the old file or none, never half of one). Standard
library only: the scripts run on the GPU machine too."""
import argparse
import json
import os
import pathlib
import sys
import tempfile


class KitInputError(ValueError):
    """Input a kit script cannot use (a file that is not what the kit writes, an option out of
    range): one line, exit 2."""


class Parser(argparse.ArgumentParser):
    """argparse with the command line's contract: a bad option is one line (not the usage), exit 2."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())}\n")


def run_main(program, main, argv=None) -> int:
    """main(argv)'s exit status, with bad input (KitInputError, an OSError naming its file) as one
    line and exit 2; anything else is a bug and keeps its traceback."""
    try:
        return main(argv)
    except (KitInputError, OSError) as e:
        print(f"{program}: {' '.join(str(e).split())[:600]}", file=sys.stderr)
        return 2


def json_lines(text):
    """(line number from 1, the line's JSON value, None; or the number, None and why it is not
    JSON) for each line of a .jsonl text that is not blank: each reader says what a line must
    be, in its own words."""
    for i, row in enumerate(text.splitlines()):
        if row.strip():
            try:
                yield i + 1, json.loads(row), None
            except (ValueError, RecursionError) as e:
                yield i + 1, None, str(e)


def is_same_file(a, b):
    """Whether paths a and b are one file: the same path resolved, or the same device and inode."""
    a, b = pathlib.Path(a), pathlib.Path(b)
    if a.resolve() == b.resolve():
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet)
        return False


def write_whole(path, data: bytes):
    """data into `path`, whole or not at all; OSError naming the path where it cannot be written."""
    path = pathlib.Path(path)
    if path.exists() and not path.is_file():  # /dev/full, a FIFO, a folder: not a file to replace
        with open(path, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        return
    fd, partial = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".partial")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(partial, path)
    except BaseException:
        try:
            os.remove(partial)
        except OSError:
            pass
        raise

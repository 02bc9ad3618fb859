"""What the kit's scripts share about files: whether an output is one of the inputs (however it is
spelled or linked), and writing an output whole (a temporary file of its own beside it, renamed
over it, so that a full disk or a stop leaves the old file or none, never half of one)."""
import os
import pathlib
import tempfile


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

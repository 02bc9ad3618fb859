"""The examples' per-dump result cache, which cannot lie, as `roundscope report`'s cannot: an
entry is believed only when it is a regular file (not a link, FIFO or folder) holding this very
measurement's result, keyed by the dump's bytes (SHA-256), the recipe, the example and the
roundscope version, with a digest over the result. Anything else there (truncated, edited,
another dump's or recipe's, `{}`) is never believed but measured again and replaced, atomically.
Also the checks the examples' own options need before any work, which raise Refused: the
example prints its message as one line and exits 2."""
import collections
import hashlib
import json
import os
import stat
import sys

import roundscope
from roundscope.dump import replacing


class Refused(Exception):
    """A bad option or input, found before any work."""


def file_digest(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def result_digest(result) -> str:
    return hashlib.sha256(json.dumps(result, sort_keys=True).encode()).hexdigest()


def _read_regular(path: str):
    """The JSON in `path` if it is a regular file that parses, else None (no FIFO is waited on)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return None
        try:
            return json.loads(f.read())
        except (ValueError, UnicodeDecodeError):
            return None


def cached(entry: str, dump: str, example: str, recipe: str, compute) -> tuple[object, str]:
    """(the result of compute() for `dump`, "read", "new" or "replaced": read from the entry,
    measured where there was none, or measured where one was not believed). The new entry is
    renamed over whatever was there (a link is replaced, not followed)."""
    key = {"example": example, "recipe": recipe, "dump": file_digest(dump), "version": roundscope.__version__}
    held = _read_regular(entry)
    if (isinstance(held, dict) and held.get("key") == key and "result" in held
            and held.get("digest") == result_digest(held["result"])):
        return held["result"], "read"
    if os.path.isdir(entry) and not os.path.islink(entry):
        raise Refused(f"{entry}: a folder where a cache entry belongs")
    was = "replaced" if os.path.lexists(entry) else "new"
    result = compute()
    if file_digest(dump) != key["dump"]:  # never a result filed under bytes it was not measured on
        raise Refused(f"{dump}: changed while it was measured")
    with replacing(entry, "w") as (f, _):
        json.dump({"key": key, "digest": result_digest(result), "result": result}, f)
    return result, was


def check_entries(folder: str, entries: list[tuple[str, str]]) -> None:
    """Before any work, for (dump, its entry) pairs: the cache folder and each entry's name can
    take a file, and no two dumps share an entry."""
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise Refused(f"{folder}: not a folder (the cache of this recipe's results)")
    seen = {}
    for dump, entry in entries:
        if entry in seen:
            raise Refused(f"{seen[entry]} and {dump}: both would be cached as {entry}")
        seen[entry] = dump
        if os.path.isdir(entry) and not os.path.islink(entry):
            raise Refused(f"{entry}: a folder where a cache entry belongs")


def measure_all(executor, threads: int, measure, files: list[str], folder: str, entries: list[str],
                recipe: str) -> list:
    """measure(file, entry, recipe) -> (result, how: cached's) over every dump, `threads` at once in
    `executor` (a concurrent.futures class), after the cache folder's checks; says on standard
    error how many were read from the cache and how many measured again. The results in order."""
    check_entries(folder, list(zip(files, entries)))
    os.makedirs(folder, exist_ok=True)
    with executor(min(threads, len(files))) as pool:
        try:
            measured = list(pool.map(measure, files, entries, [recipe] * len(files)))
        except (ValueError, OSError) as e:  # a dump that changed since it was checked
            raise Refused(str(e).splitlines()[0]) from None
    how = collections.Counter(was for _, was in measured)
    print(f"{how['read']} of {len(files)} dumps read from {folder}, {how['replaced']} measured again "
          "(entries not this dump's result)", file=sys.stderr)
    return [result for result, _ in measured]


def preset(recipe: str) -> str:
    """`recipe` if it names a preset (it also names the cache folder: nothing else may)."""
    names = [r["name"] for r in roundscope.recipes()["recipes"]]
    if recipe not in names:
        raise Refused(f"--recipe: unknown recipe {recipe!r} (presets: {', '.join(names)})")
    return recipe


def output_path(path: str | None, inputs: list[str]) -> str | None:
    """--json's path, refused when it is one of `inputs` (the dumps, the cache entries), a folder,
    or in a folder that does not exist."""
    if path is None:
        return None
    if any(os.path.abspath(path) == os.path.abspath(i) or os.path.exists(path) and os.path.exists(i)
           and os.path.samefile(path, i) for i in inputs):
        raise Refused(f"--json: {path} is one of the inputs")
    if os.path.isdir(path):
        raise Refused(f"--json: {path} is a folder")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise Refused(f"--json: {folder}: no such folder")
    return path

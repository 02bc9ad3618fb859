"""Every repository path that a comment, a doc or a script names exists: a file moved or
deleted without its mentions fails here. A path is a token that starts with one of the
repository's top-level folders (`emu/attention/flash/flash_context.hpp`, `tools/setup.sh`), read from
the repository root or, as CMake reads its lists, from the naming file's folder. Globs
(`cli/*_flags.hpp`) and braces (`mma_{bf16,fp16}`) must match something; a path without its
extension names the files it begins (`lib/tensor_io` for .hpp and .cpp); a trailing `...`
marks a placeholder. CHANGELOG.md is history: it names paths that were moved on purpose.

Usage: check_paths.py [REPO]   (exit 1 and one line per dead path)"""
import glob
import os
import re
import subprocess
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", ".."))
TOP = ["lib", "emu", "analysis", "api", "gpu", "cli", "python", "tools", "tests", "docs", "examples", ".ci"]
# Not preceded by a path character (so `github.com/x/tests/y` and `build/tools/z` are not read as ours).
PATH = re.compile(r"(?<![\w./~-])(?:%s)/[\w./*{},+-]*" % "|".join(re.escape(t) for t in TOP))
TEXT = (".cpp", ".hpp", ".cu", ".cuh", ".h", ".py", ".sh", ".md", ".txt", ".toml", ".cfg", ".ini", "")


def tracked():
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    history = {"CHANGELOG.md"}
    return [
        f
        for f in out.splitlines()
        if os.path.splitext(f)[1] in TEXT and not f.startswith("tests/data/") and f not in history
    ]


def exists(path, folder):
    path = path.rstrip(".,:;)")
    if "{" in path:  # a{b,c}d: every expansion
        m = re.match(r"(.*)\{([^}]*)\}(.*)", path)
        return all(exists(m.group(1) + alt + m.group(3), folder) for alt in m.group(2).split(","))
    for base in (ROOT, os.path.join(ROOT, folder)):
        full = os.path.join(base, path)
        if glob.glob(full) if "*" in path else os.path.exists(full) or glob.glob(full + ".*"):
            return True
    return False


def main():
    dead = []
    for name in tracked():
        try:
            with open(os.path.join(ROOT, name), encoding="utf-8") as f:
                lines = f.read().splitlines()
        except (UnicodeDecodeError, FileNotFoundError):
            continue
        for number, line in enumerate(lines, 1):
            for m in PATH.finditer(line):
                token = m.group(0)
                if not token.endswith("...") and not exists(token, os.path.dirname(name)):
                    dead.append(f"{name}:{number}: {token}")
    for d in dead:
        print("dead path", d)
    print(f"check_paths: {len(dead)} dead path(s)")
    return 1 if dead else 0


if __name__ == "__main__":
    sys.exit(main())

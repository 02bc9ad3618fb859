"""The repository's own gates, and that each can fail: every C++ and CUDA file is formatted as
.clang-format says (tests/repo/check_format.sh, run on the repository by ctest's format_check,
with no Python), every Python file passes ruff.toml's rules
(tests/repo/check_python.sh) and the package and tools pass mypy.ini's type checks
(tests/repo/check_types.sh), includes point down the layers (tests/repo/check_layers.py), and
every repository path a comment, a doc or a script names exists (tests/repo/check_paths.py),
and the figures the docs quote in several places agree (tests/repo/check_figures.py).
Each check also runs on a scratch repository holding one fault, which it must report."""
import pathlib
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT

HERE = ROOT / "tests" / "repo"
# Top-level folders of the scratch repositories, spelled so that this file names no path itself.
EMU, LIB, TOOLS, ANALYSIS, GPU = "e" + "mu", "l" + "ib", "t" + "ools", "a" + "nalysis", "g" + "pu"


def scratch_repository(folder, files):
    """A git repository with the project's .clang-format, ruff.toml and mypy.ini, the top-level folders the
    path check knows, and `files` ({path: text}) tracked."""
    subprocess.run(["git", "init", "-q", folder], check=True)
    shutil.copy(ROOT / ".clang-format", folder / ".clang-format")
    types = (ROOT / "mypy.ini").read_text()  # without its comments, which name this repository's paths
    (folder / "mypy.ini").write_text("".join(line for line in types.splitlines(True) if not line.startswith("#")))
    # ruff.toml's rules without its comments and per-file exceptions (which name this repository's paths)
    rules = (ROOT / "ruff.toml").read_text().split("[lint.per-file-ignores]")[0]
    (folder / "ruff.toml").write_text("".join(line for line in rules.splitlines(True) if not line.startswith("#")))
    for path, text in files.items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_text(text)
    subprocess.run(["git", "add", "-A"], cwd=folder, check=True)
    return folder


def format_check(repo):
    return subprocess.run([HERE / "check_format.sh", repo], capture_output=True, text=True, timeout=300)


def python_check(repo):
    return subprocess.run([HERE / "check_python.sh", repo], capture_output=True, text=True, timeout=300)


def type_check(repo, package=None):
    """check_types.sh on `repo`'s tools, and on the package as built when `package` (the folder
    holding roundscope/) is given; mypy's cache beside the build."""
    args = [HERE / "check_types.sh", repo] + ([package, package.parent / "mypy-cache"] if package else [])
    return subprocess.run(args, capture_output=True, text=True, timeout=600)


def layer_check(repo):
    return subprocess.run([sys.executable, HERE / "check_layers.py", repo], capture_output=True, text=True, timeout=300)


def path_check(repo):
    return subprocess.run([sys.executable, HERE / "check_paths.py", repo], capture_output=True, text=True, timeout=300)


def test_a_misformatted_file_fails_the_format_check(tmp_path):
    repo = scratch_repository(tmp_path, {f"{EMU}/good.cpp": "int x = 1;\n", f"{EMU}/bad.cpp": "int  y =2 ;\n"})
    p = format_check(repo)
    assert p.returncode == 1 and "bad.cpp" in p.stderr and "good.cpp" not in p.stderr, p.stdout + p.stderr


def test_every_python_file_passes_the_linter():
    p = python_check(ROOT)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]


@pytest.mark.parametrize("fault", [
    "import os\n",                                   # an unused import
    "def f():\n    return undefined_name\n",         # an undefined name
    "x = '" + "y" * 130 + "'\n",                     # a line past 120
    "l = 1\n",                                       # a name read as 1 or I
])
def test_a_python_fault_fails_the_lint(tmp_path, fault):
    repo = scratch_repository(tmp_path, {f"{LIB}/good.py": "import os\n\nprint(os.sep)\n", f"{LIB}/bad.py": fault})
    p = python_check(repo)
    assert p.returncode == 1 and "bad.py" in p.stdout and "good.py" not in p.stdout, p.stdout + p.stderr
    assert not (repo / ".ruff_cache").exists(), "the check leaves nothing in the repository"


def test_the_package_and_tools_pass_the_type_check():
    import roundscope
    package = pathlib.Path(roundscope.__file__).parent.parent  # build/python: the package beside its core's stub
    assert (package / "roundscope" / "_core.pyi").exists(), package
    p = type_check(ROOT, package)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]


@pytest.mark.parametrize("fault", [
    "x: int = 'one'\n",                                    # a value of the wrong type
    "def f(n: int) -> str:\n    return n\n",                        # a wrong return type
    "import os\n\n\ndef f() -> None:\n    os.path.join(1)\n",    # a call with a wrong argument
])
def test_a_type_fault_fails_the_type_check(tmp_path, fault):
    repo = scratch_repository(tmp_path, {f"{TOOLS}/good.py": "def f(n: int) -> int:\n    return n + 1\n",
                                         f"{TOOLS}/bad.py": fault})
    p = type_check(repo)
    assert p.returncode == 1 and "bad.py" in p.stdout and "good.py" not in p.stdout, p.stdout + p.stderr
    assert not (repo / ".mypy_cache").exists(), "the check leaves nothing in the repository"


def test_includes_point_down_the_layers():
    p = layer_check(ROOT)
    assert p.returncode == 0, p.stdout[-2000:]


@pytest.mark.parametrize("includer, included, way", [
    (f"{EMU}/numbers/low.hpp", f"{ANALYSIS}/high.hpp", "up"),
    (f"{EMU}/block/one.hpp", f"{EMU}/mufu/other.hpp", "sideways"),
    (f"{LIB}/base.hpp", f"{EMU}/numbers/low.hpp", "up"),
    (f"{EMU}/attention/flash/ok.hpp", f"{EMU}/numbers/low.hpp", None),   # down: allowed
    (f"{EMU}/attention/math/low.hpp", f"{EMU}/attention/flash/ok.hpp", "up"),  # the rooms inside attention/
    (f"{EMU}/attention/recipe/r.hpp", f"{EMU}/attention/inputs/i.hpp", "sideways"),
    (f"{GPU}/primitives/p.hpp", f"{GPU}/kernels/k.cuh", "up"),
    (f"{GPU}/host/h.hpp", f"{GPU}/primitives/p.hpp", None),  # the simulated GPU and the primitives: one unit
    (f"{GPU}/kernels/k.cuh", f"{GPU}/probes/p.hpp", "sideways"),
])
def test_an_include_against_the_layers_fails(tmp_path, includer, included, way):
    repo = scratch_repository(tmp_path, {includer: f'#include "{included}"\n', included: "int x;\n"})
    p = layer_check(repo)
    if way is None:
        assert p.returncode == 0, p.stdout
    else:
        assert p.returncode == 1 and f"{includer}:1:" in p.stdout and f": {way}" in p.stdout, p.stdout


def test_a_source_file_outside_every_room_fails(tmp_path):
    repo = scratch_repository(tmp_path, {f"{EMU}/attention/loose.hpp": "int x;\n", f"{EMU}/numbers/ok.hpp": "int y;\n"})
    p = layer_check(repo)
    assert p.returncode == 1 and f"{EMU}/attention/loose.hpp: in no room" in p.stdout, p.stdout
    assert "ok.hpp" not in p.stdout, p.stdout


def test_the_docs_quote_each_figure_alike():
    p = subprocess.run([sys.executable, HERE / "check_figures.py", ROOT], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout[-2000:]


def figure_check():
    sys.path.insert(0, str(HERE))
    import check_figures
    return check_figures


def test_one_digit_changed_in_one_quote_fails_the_figure_check():
    """Every quantity: its first quote with one digit changed, the rest as they are."""
    import re
    figures = figure_check()
    texts = {}

    def read(path):
        return texts.setdefault(path, (ROOT / path).read_text())
    for name, places in figures.QUANTITIES.items():
        path, pattern = places[0]
        text = read(path)
        m = re.search(pattern, text)
        digit = max(i for i in range(m.start(1), m.end(1)) if text[i].isdigit())
        changed = text[:digit] + str((int(text[digit]) + 1) % 10) + text[digit + 1:]
        problems = figures.check(lambda p: changed if p == path else read(p))
        assert [x for x in problems if x.startswith(name + ":")], (name, problems)
        assert not [x for x in problems if not x.startswith(name + ":")], (name, problems)


@pytest.mark.parametrize("values, same", [
    (["0.08", "0.080"], True), (["17", "17.15"], True), (["0.09", "0.080"], False),
    (["4,050", "4050"], True), (["+251.5", "+251.4"], False), (["4 min 6 s", "4 min 6 s"], True),
    (["4 min 6 s", "4 min 7 s"], False)])
def test_quotes_agree_at_the_coarser_precision(values, same):
    assert figure_check().agree(values) == same


def test_every_named_path_exists():
    p = path_check(ROOT)
    assert p.returncode == 0, p.stdout[-2000:]


@pytest.mark.parametrize("mention, dead", [
    ("// see {emu}/numbers/gone.hpp", True),
    ("// see {emu}/numbers/round.hpp", False),
    ("// see {emu}/numbers/round", False),           # a stem names the files it begins
    ("// see {emu}/numbers/*.hpp", False),           # a glob that matches
    ("// see {emu}/numbers/*.cu", True),             # one that does not
    ("// see {emu}/numbers/{{round,gone}}.hpp", True),  # braces: every expansion must exist
    ("// see {emu}/... for the rest", False),        # a placeholder
    ("// github.com/x/{emu}/gone.hpp", False),       # not ours: part of another path
])
def test_a_dead_path_fails_the_path_check(tmp_path, mention, dead):
    repo = scratch_repository(tmp_path, {f"{EMU}/numbers/round.hpp": "int r;\n",
                                         f"{LIB}/a.cpp": mention.format(emu=EMU) + "\n"})
    p = path_check(repo)
    assert p.returncode == (1 if dead else 0), p.stdout
    if dead:
        assert f"{LIB}/a.cpp:1:" in p.stdout, p.stdout


def flags_in_messages(root):
    """(file, line) of every string literal below the command line (lib, emu, analysis, gpu) that
    names a command-line flag: messages there name the value; the CLI and the Python package name
    what carried it (the flag, the argument)."""
    import re
    found = []
    for folder in (LIB, EMU, "analysis", "gpu"):
        for path in sorted((root / folder).rglob("*")):
            if path.suffix not in (".cpp", ".hpp", ".cu", ".cuh"):
                continue
            for number, line in enumerate(path.read_text().splitlines(), 1):
                code = line.split("//", 1)[0]
                if any(re.search(r"(?<![\w-])--[a-z]", s) for s in re.findall(r'"(?:[^"\\]|\\.)*"', code)):
                    found.append((str(path.relative_to(root)), number))
    return found


def test_no_message_below_the_command_line_names_a_flag(tmp_path):
    assert flags_in_messages(ROOT) == []
    scratch = scratch_repository(tmp_path / "scratch", {
        f"{EMU}/x.cpp": 'void f() { throw Error("--round: unknown mode"); }  // "--fine" in a comment\n',
        f"{LIB}/y.cpp": 'const char* s = "a -- b";  // "--x"\n'})
    (scratch / "analysis").mkdir()
    (scratch / "gpu").mkdir()
    assert flags_in_messages(scratch) == [(f"{EMU}/x.cpp", 1)]


def test_the_generated_wgmma_instructions_are_up_to_date():
    gen = ROOT / "tools" / "gpu" / "gen_wgmma_asm.py"
    p = subprocess.run([sys.executable, str(gen), "--check"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr

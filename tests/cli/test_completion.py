"""`roundscope completion bash|zsh`: scripts generated from the registered commands, so every
command and every option its --help lists completes, with the values of the options that name a
table (recipes, formats, rounding modes); bash runs the script as a shell would."""
import re
import shlex
import shutil
import subprocess

import pytest

COMMANDS = ["formats", "cast", "inspect", "mx", "mma", "probe", "truth", "attention", "recipes", "crosscheck",
            "pcollapse", "leak", "headroom", "bias", "demo", "attribute", "compare", "fit", "check", "report",
            "completion"]


def complete(script, *words):
    """What bash's completion offers after `roundscope WORDS...` (the last word being typed)."""
    quoted = " ".join(shlex.quote(w) for w in ("roundscope", *words))
    program = "\n".join([script, f"COMP_WORDS=({quoted})", f"COMP_CWORD={len(words)}", "_roundscope",
                          'printf "%s\\n" "${COMPREPLY[@]}"']) + "\n"
    p = subprocess.run(["bash", "-c", program], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return sorted(p.stdout.split())


@pytest.fixture(scope="module")
def bash_script(cli):
    return cli.run("completion", "bash").stdout


def options_of(cli, command):
    """The long options --help lists (its option lines: "  -o,--out TEXT  ...")."""
    help_text = cli.run(command, "--help").stdout
    return set(re.findall(r"^\s+(?:-\w,)?(--[a-z][a-z0-9-]*)", help_text, flags=re.M))


def test_bash_completes_commands_options_and_values(cli, bash_script):
    assert subprocess.run(["bash", "-n"], input=bash_script, text=True).returncode == 0
    assert complete(bash_script, "") == sorted(COMMANDS + ["--help", "--version"])
    assert complete(bash_script, "at") == ["attention", "attribute"]
    for command in COMMANDS:
        offered = set(complete(bash_script, command, "--"))
        assert options_of(cli, command) <= offered, (command, options_of(cli, command) - offered)
    assert complete(bash_script, "attention", "x.safetensors", "--recipe", "fa3") == ["fa3-bf16", "fa3-fp8"]
    assert complete(bash_script, "cast", "1.5", "--to", "e4") == ["e4m3", "e4m3fnuz"]
    assert complete(bash_script, "cast", "1.5", "--round", "r") == ["rna", "rne", "rtz"]
    assert complete(bash_script, "mx", "x.npy", "--format", "mxfp6") == ["mxfp6_e2m3", "mxfp6_e3m2"]
    assert complete(bash_script, "completion", "") == ["bash", "zsh"]


def test_zsh_script_names_every_command_and_option(cli):
    script = cli.run("completion", "zsh").stdout
    assert script.startswith("#compdef roundscope\n")
    for command in COMMANDS:
        assert re.search(rf"^        '{command}:", script, flags=re.M), command
        block = script.split(f"\n        {command})\n", 1)[1].split(" ;;\n", 1)[0]
        for option in options_of(cli, command):
            assert f"'*{option}[" in block, (command, option)
    assert ":value:(fa2-bf16 fa2-bf16-max-adjust" in script
    assert "'*--json[Print one JSON object]' " in script  # a flag takes no value
    if shutil.which("zsh"):
        assert subprocess.run(["zsh", "-n"], input=script, text=True).returncode == 0


def test_an_unknown_shell(cli):
    assert cli.error("completion", "fish") == "completion: 'fish' is not one of bash|zsh"
    assert cli.error("completion", "zhs") == "completion: 'zhs' is not one of bash|zsh; did you mean 'zsh'?"

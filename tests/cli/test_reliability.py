"""Nothing a user types or points roundscope at may crash it, hang it, destroy a file, or pass
silently with a wrong answer. Every case runs the binary in a scratch folder and asserts its
exit code; for exit 2, the one line `roundscope: error: ...` naming the option, file or tensor;
that every file in the folder is byte-identical afterwards (inputs and older outputs); and that
no file is left behind but the expected output.

Classes (docs/cli.md, "Everywhere"): unknown options; numeric options out of range, NaN, Inf,
wrapping seeds; outputs that are inputs (same path, other spellings, hard and symbolic links)
or not regular files; inputs that are FIFOs, folders, missing, truncated while read; hostile
attention files (empty axes, NaN, overflow, wrong shapes, bad metadata); sizes that cannot fit;
full disks (RLIMIT_FSIZE) and failed writes to standard output; concurrent writers; signals
during a write; help, version and the contract's shared flags."""
import hashlib
import os
import random
import resource
import signal
import subprocess
import time
from dataclasses import dataclass
from typing import Callable, Optional

import pytest

from files_by_hand import f32_bytes as f32
from files_by_hand import write_safetensors
from signal_at_temp import build_shim, runs_stopped_at_each_temporary

SCRATCH = "{scratch}"  # stands for the scratch folder's path in an argument
SCRATCH_NAME = "{scratch_name}"  # and for its name
GPU = os.path.exists("/dev/nvidia0")


# ---------------------------------------------------------------- the scratch folder

def gaussian(n, seed):
    r = random.Random(seed)
    return [r.gauss(0, 1) for _ in range(n)]


def make_scratch(folder):
    def safetensors(path, tensors, metadata=None):
        write_safetensors(os.path.join(folder, path), tensors, metadata)

    def attention_file(path, h=2, n=32, d=16, q=None, metadata=None, drop=(), extra=None):
        size = h * n * d
        t = {name: ("F32", [h, n, d], f32(gaussian(size, i))) for i, name in enumerate(("q", "k", "v", "do"))}
        if q is not None:
            t["q"] = ("F32", [h, n, d], f32(q))
        for name in drop:
            t.pop(name)
        t.update(extra or {})
        safetensors(path, t, metadata)
        # The same with an o, as compare reads it (what a kernel wrote): with_o/PATH.
        os.makedirs(os.path.join(folder, "with_o"), exist_ok=True)
        shape = list(t["q"][1]) if "q" in t else [h, n, d]
        safetensors(os.path.join("with_o", path), {**t, "o": ("BF16", shape, bytes(2 * h * n * d))}, metadata)

    for name, options in ATTENTION_FILES.items():
        attention_file(name, **options)
    for name in REPORTED:  # a dump folder of the one file, as report reads it
        os.makedirs(os.path.join(folder, "report_" + name), exist_ok=True)
        with open(os.path.join(folder, "with_o", name), "rb") as src:
            data = src.read()
        with open(os.path.join(folder, "report_" + name, "step0_layer0.safetensors"), "wb") as dst:
            dst.write(data)
    safetensors("vec.safetensors", {"x": ("F32", [4, 64], f32(gaussian(256, 3))), "y": ("F32", [64], f32(gaussian(64, 4)))})
    safetensors("empty_axis.safetensors", {"x": ("F32", [4, 0], b"")})
    vec = open(os.path.join(folder, "vec.safetensors"), "rb").read()
    open(os.path.join(folder, "UPPER.SAFETENSORS"), "wb").write(vec)
    att = open(os.path.join(folder, "att.safetensors"), "rb").read()
    open(os.path.join(folder, "truncated.safetensors"), "wb").write(att[:100])
    open(os.path.join(folder, "garbage.safetensors"), "wb").write(b"\xff" * 64)
    open(os.path.join(folder, "notes.txt"), "w").write("not a tensor file\n")
    os.mkfifo(os.path.join(folder, "fifo.safetensors"))
    os.mkdir(os.path.join(folder, "folder.safetensors"))
    os.link(os.path.join(folder, "att.safetensors"), os.path.join(folder, "hardlink.safetensors"))
    os.symlink("att.safetensors", os.path.join(folder, "symlink.safetensors"))
    os.symlink("loop-b", os.path.join(folder, "loop-a"))  # a loop of links, for paths through it
    os.symlink("loop-a", os.path.join(folder, "loop-b"))
    open(os.path.join(folder, "old_output.safetensors"), "wb").write(OLD_OUTPUT)
    open(os.path.join(folder, "out.safetensors.partial"), "wb").write(b"a user's file that happens to have this name")


OLD_OUTPUT = b"an older output that must survive a failed run"
REPORTED = [f"{stem}.safetensors" for stem in (  # the hostile files report also reads, each in a folder of its own
    "mask_nan", "mask_posinf", "mask_shape", "mask_int", "mask_and_bias", "bool_mask_shape", "gqa_3_of_2",
    "gqa_group", "gqa_group_text", "gqa_off", "alignment", "window_neg", "window_text", "softcap_nan", "softcap_neg", "dropout",
    "descale", "nan", "bad_causal", "bad_scale")]
ATTENTION_FILES = {  # q, k, v, do [2, 32, 16] but for what is named
    "att.safetensors": dict(metadata={"causal": "true"}),
    "d0.safetensors": dict(d=0),
    "n0.safetensors": dict(n=0),
    "nan.safetensors": dict(q=[float("nan")] * (2 * 32 * 16)),
    "inf.safetensors": dict(q=[float("inf")] + [0.0] * (2 * 32 * 16 - 1)),
    "huge_q.safetensors": dict(q=[1e18] + [0.5] * (2 * 32 * 16 - 1)),
    "no_v.safetensors": dict(drop=("v",)),
    "no_do.safetensors": dict(drop=("do",)),
    "bad_k.safetensors": dict(extra={"k": ("F32", [2, 32, 8], f32([0.0] * (2 * 32 * 8)))}),
    "int_q.safetensors": dict(extra={"q": ("I32", [2, 32, 16], b"\0" * (4 * 2 * 32 * 16))}),
    "bad_causal.safetensors": dict(metadata={"causal": "maybe"}),
    "bad_scale.safetensors": dict(metadata={"softmax_scale": "nan"}),
    "with_x.safetensors": dict(extra={"x": ("F32", [32, 8], f32(gaussian(32 * 8, 9)))}),
    # masks, grouped heads and the attention problem's metadata (docs/cli.md, "The attention problem")
    "mask_nan.safetensors": dict(extra={"attn_mask": ("F32", [32, 32], f32([float("nan")] + [0.0] * 1023))}),
    "mask_posinf.safetensors": dict(extra={"attn_mask": ("F32", [32, 32], f32([0.0] * 33 + [float("inf")] + [0.0] * 990))}),
    "mask_shape.safetensors": dict(extra={"attn_mask": ("F32", [32, 31], f32([0.0] * 992))}),
    "mask_int.safetensors": dict(extra={"attn_mask": ("I32", [32, 32], bytes(4 * 1024))}),
    "mask_and_bias.safetensors": dict(extra={"attn_mask": ("F32", [32, 32], f32([0.0] * 1024)),
                                             "bias": ("F32", [32, 32], f32([0.0] * 1024))}),
    "bool_mask_shape.safetensors": dict(extra={"attn_mask": ("BOOL", [3, 32], bytes([1]) * 96)}),
    "gqa_3_of_2.safetensors": dict(extra={n: ("F32", [3, 32, 16], f32(gaussian(3 * 512, 20 + i)))
                                          for i, n in enumerate("kv")}),
    "gqa_group.safetensors": dict(h=4, metadata={"gqa_group": "3"}, extra={
        n: ("F32", [2, 32, 16], f32(gaussian(2 * 512, 30 + i))) for i, n in enumerate("kv")}),
    "gqa_group_text.safetensors": dict(metadata={"gqa_group": "two"}),
    "gqa_off.safetensors": dict(h=4, metadata={"enable_gqa": "false"}, extra={
        n: ("F32", [2, 32, 16], f32(gaussian(2 * 512, 40 + i))) for i, n in enumerate("kv")}),
    "alignment.safetensors": dict(metadata={"causal": "true", "causal_alignment": "sideways"}),
    "window_neg.safetensors": dict(metadata={"window_left": "-5"}),
    "window_text.safetensors": dict(metadata={"window_right": "two"}),
    "softcap_nan.safetensors": dict(metadata={"softcap": "nan"}),
    "softcap_neg.safetensors": dict(metadata={"softcap": "-30"}),
    "dropout.safetensors": dict(metadata={"dropout_p": "0.1"}),
    "descale.safetensors": dict(metadata={"descale_q": "2"}),
}


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("reliability"))
    make_scratch(folder)
    return folder


def with_o(path):
    """The copy with an o of an attention file (compare needs a kernel output), else path."""
    return os.path.join("with_o", path) if path in ATTENTION_FILES else path


# ---------------------------------------------------------------- the case runner

def snapshot(folder):
    out = {}
    for name in os.listdir(folder):
        path = os.path.join(folder, name)
        if os.path.isfile(path) and not os.path.islink(path) and not name.startswith("fifo"):
            out[name] = hashlib.sha256(open(path, "rb").read()).hexdigest()
        else:
            out[name] = None
    return out


@dataclass
class Case:
    name: str
    args: list
    rc: int = 2
    phrases: tuple = ()
    absent: tuple = ()  # what the message must not say (another file's name, say)
    outputs: tuple = ()
    timeout: int = 60
    stdout_to_full: bool = False  # standard output is /dev/full
    preexec: Optional[Callable] = None


def run_case(cli, folder, c):
    """Runs roundscope ARGS in FOLDER and asserts the exit code, the error line, the untouched
    files and that nothing but OUTPUTS appeared. Returns (stdout, stderr)."""
    args = [str(a).replace(SCRATCH, folder).replace(SCRATCH_NAME, os.path.basename(folder)) for a in c.args]
    before = snapshot(folder)
    stdout = open("/dev/full", "w") if c.stdout_to_full else subprocess.PIPE
    try:
        try:
            p = subprocess.run([cli.path, *args], cwd=folder, stdout=stdout, stderr=subprocess.PIPE, text=True,
                               timeout=c.timeout, preexec_fn=c.preexec)
        except subprocess.TimeoutExpired:
            pytest.fail(f"hung for more than {c.timeout} s: {args}")
        out, err = p.stdout or "", p.stderr or ""
        after = snapshot(folder)
        assert p.returncode == c.rc, f"got {p.returncode}: {args}\n{err.strip()[:400]}"
        if c.rc == 2:
            assert err.count("\n") == 1 and err.startswith("roundscope: error: "), repr(err[:400])
            missing = [x for x in c.phrases if x not in err]
            assert not missing, f"missing {missing} in {err.strip()[:300]}"
            wrong = [x for x in c.absent if x in err]
            assert not wrong, f"{wrong} in {err.strip()[:300]}"
        changed = [f for f, digest in before.items() if after.get(f, "gone") != digest and f not in c.outputs]
        assert not changed, f"{args} changed or removed {changed}"
        stray = set(after) - set(before) - set(c.outputs)
        assert not stray, f"{args} left {sorted(stray)}"
        return out, err
    finally:
        if c.stdout_to_full:
            stdout.close()
        after = snapshot(folder)
        for f in (set(after) - set(before)):
            path = os.path.join(folder, f)
            if os.path.isfile(path):
                os.remove(path)
            elif os.path.isdir(path) and not os.listdir(path):
                os.rmdir(path)


def file_size_limit(limit):
    def apply():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write then fails with EFBIG
    return apply


COMMANDS = ["formats", "cast", "inspect", "mx", "mma", "probe", "truth", "attention", "recipes", "crosscheck",
            "pcollapse", "leak", "headroom", "bias", "demo", "attribute", "compare", "fit", "check"]
ATTENTION = {  # attention commands with the smallest synthetic run each takes
    "pcollapse": ["pcollapse", "--synthetic", "--n", "64", "--d", "16"],
    "leak": ["leak", "--synthetic", "--n", "32", "--d", "16"],
    "headroom": ["headroom", "--synthetic", "--n", "32", "--d", "16"],
    "bias": ["bias", "--synthetic", "--n", "32", "--d", "16"],
    "attribute": ["attribute", "--synthetic", "--n", "32", "--d", "16", "--recipe", "fa2-bf16"],
}
FILE_COMMANDS = {  # every command that reads an attention file, as it is called with one
    "attention": lambda f: ["attention", f, "--recipe", "fa2-bf16", "-o", "out.safetensors"],
    "truth": lambda f: ["truth", f, "-o", "out.safetensors"],
    "crosscheck": lambda f: ["crosscheck", f, "--recipe", "fa2-bf16"],
    "pcollapse": lambda f: ["pcollapse", f],
    "leak": lambda f: ["leak", f],
    "headroom": lambda f: ["headroom", f],
    "bias": lambda f: ["bias", f],
    "attribute": lambda f: ["attribute", f, "--recipe", "fa2-bf16"],
    "compare": lambda f: ["compare", with_o(f), "--recipe", "fa2-bf16"],
    "fit": lambda f: ["fit", with_o(f), "--from", "fa2-bf16", "--max-evaluations", "2"],
}
CASES = []


def case(name, args, **kwargs):
    CASES.append(Case(name, args, **kwargs))


# ---------------------------------------------------------------- 1. unknown options and commands
case("unknown command", ["frobnicate"], phrases=("unknown command 'frobnicate'",))
# A newline or a terminal escape in an argument stays inside the one error line.
case("argument with a newline", ["formats", "a\nb"], phrases=("a\\x0ab",))
case("argument with an escape", ["cast", "--to", "bf16", "1", "\x1b[2J"], phrases=("\\x1b[2J",))
case("no command", [], phrases=("subcommand",))
for c in COMMANDS:
    case(f"{c}: unknown option", [c, "--no-such-option"], phrases=("--no-such-option",))

# ---------------------------------------------------------------- 2. numeric options
bad_integers = ["0", "-1", "1.5", "1e3", "nan", "", "99999999999999999999"]
for c, base in ATTENTION.items():
    for v in bad_integers:
        case(f"{c} --n {v!r}", base + ["--n", v], phrases=("--n",))
    for v in ["1", "0", "2048", "x"]:
        case(f"{c} --d {v!r}", base + ["--d", v], phrases=("--d",))
    for v in ["-1", "18446744073709551616", "1.0", "0x"]:
        case(f"{c} --seed {v!r}", base + ["--seed", v], phrases=("--seed",))
    for v in ["-1", "100000", "two"]:
        case(f"{c} --threads {v!r}", base + ["--threads", v], phrases=("--threads",))
    for v in ["nan", "inf", "-inf", "0", "-0.5", "1e400", "abc"]:
        case(f"{c} --softmax-scale {v!r}", base + ["--softmax-scale", v], phrases=("--softmax-scale",))
for v in ["nan", "inf", "1e39", "0", "-256"]:
    case(f"pcollapse --scale {v}", ATTENTION["pcollapse"] + ["--scale", v], phrases=("--scale",))
for v in ["nan", "1e6", "-1e6"]:
    case(f"pcollapse --sink-strength {v}", ATTENTION["pcollapse"] + ["--sink-strength", v],
         phrases=("--sink-strength",))
case("pcollapse --k-sink above N", ATTENTION["pcollapse"] + ["--k-sink", "64"], phrases=("--k-sink",))
case("pcollapse --k-sink above a file's Nk", ["pcollapse", "att.safetensors", "--k-sink", "40"], phrases=("--k-sink",))
case("pcollapse --order sideways", ATTENTION["pcollapse"] + ["--order", "sideways"], phrases=("--order",))
case("leak --block 0", ATTENTION["leak"] + ["--block", "0"], phrases=("--block",))
case("leak --format mxfp3", ATTENTION["leak"] + ["--format", "mxfp3"], phrases=("--format",))
case("leak --no-causal", ATTENTION["leak"] + ["--no-causal"], phrases=("--no-causal",))
case("bias --steps 0", ATTENTION["bias"] + ["--steps", "0"], phrases=("--steps",))
case("bias --steps 100000000", ATTENTION["bias"] + ["--steps", "100000000"], phrases=("--steps",))
case("bias --d-model 1", ATTENTION["bias"] + ["--d-model", "1"], phrases=("--d-model",))
case("bias --tie-gap nan", ATTENTION["bias"] + ["--tie-gap", "nan"], phrases=("--tie-gap",))
case("bias --tie-gap -1", ATTENTION["bias"] + ["--tie-gap", "-1"], phrases=("--tie-gap",))
case("bias --tie-gap 1e9", ATTENTION["bias"] + ["--tie-gap", "1e9"], phrases=("--tie-gap",))
case("bias --d-model 65537", ATTENTION["bias"] + ["--d-model", "65537"], phrases=("--d-model",))
case("bias --heads 0", ATTENTION["bias"] + ["--heads", "0"], phrases=("--heads",))
case("headroom --scenario flat", ATTENTION["headroom"] + ["--scenario", "flat"], phrases=("--scenario", "flat"))
for c in ("attention", "attribute", "crosscheck"):
    case(f"{c} --recipe nope", [c, "att.safetensors", "--recipe", "nope", "-o", "x.safetensors"] if c == "attention"
         else [c, "att.safetensors", "--recipe", "nope"], phrases=("--recipe", "nope"))
case("attention --set bad", ["attention", "att.safetensors", "--recipe", "fa2-bf16", "--set", "p_scale=-1", "-o",
                             "x.safetensors"], phrases=("p_scale",))
case("attention --set no key", ["attention", "att.safetensors", "--recipe", "fa2-bf16", "--set", "nonsense", "-o",
                                "x.safetensors"], phrases=("--set",))
case("truth --bits 8", ["truth", "att.safetensors", "--bits", "8", "-o", "x.safetensors"], phrases=("--bits",))
case("truth --softmax-scale nan", ["truth", "att.safetensors", "--softmax-scale", "nan", "-o", "x.safetensors"],
     phrases=("--softmax-scale",))
case("attention --scale inf", ["attention", "att.safetensors", "--recipe", "fa2-bf16", "--scale", "inf", "-o",
                               "x.safetensors"], phrases=("--softmax-scale",))
case("probe --tiles 0", ["probe", "--out", "probe", "--tiles", "0"], phrases=("--tiles",))
case("probe --seed -5", ["probe", "--out", "probe", "--seed", "-5"], phrases=("--seed",))
case("demo --threads -2", ["demo", "--threads", "-2"], phrases=("--threads",))
case("mma --threads nan", ["mma", "vec.safetensors", "--threads", "nan"], phrases=("--threads",))
case("inspect --threads 1e9", ["inspect", "vec.safetensors", "--threads", "1e9"], phrases=("--threads",))
for v in ["0", "-32", "2000000", "x"]:
    case(f"mx --block {v}", ["mx", "vec.safetensors", "--format", "mxfp4", "--block", v, "-o", "x.safetensors"],
         phrases=("--block",))
case("mx --axis 9", ["mx", "vec.safetensors:x", "--format", "mxfp4", "--axis", "9", "-o", "x.safetensors"],
     phrases=("axis 9 is outside shape",))
case("mx --offset 40", ["mx", "vec.safetensors:x", "--format", "mxfp4", "--offset", "40", "-o", "x.safetensors"],
     phrases=("offset",))
case("mx --single-level on MX", ["mx", "vec.safetensors", "--format", "mxfp4", "--single-level", "-o", "x.safetensors"],
     phrases=("--single-level",))
case("mx --scale-rule up", ["mx", "vec.safetensors", "--format", "mxfp4", "--scale-rule", "up", "-o", "x.safetensors"],
     phrases=("--scale-rule",))
case("mx --format mxfp5", ["mx", "vec.safetensors", "--format", "mxfp5", "-o", "x.safetensors"], phrases=("--format",))
case("mx --seed 2^64", ["mx", "vec.safetensors", "--format", "mxfp4", "--seed", "18446744073709551616", "-o",
                        "x.safetensors"], phrases=("--seed",))
for v in ["nan", "inf", "1e999"]:
    case(f"cast --scale {v}", ["cast", "vec.safetensors", "--to", "bf16", "--scale", v, "-o", "x.safetensors"],
         phrases=("--scale",))
for v in ["-1", "18446744073709551616", "1.5"]:
    case(f"cast --seed {v}", ["cast", "0.1", "--to", "bf16", "--round", "sr", "--seed", v], phrases=("--seed",))
case("cast 1e999999999", ["cast", "1e999999999", "--to", "bf16"], phrases=("1e999999999", "range"))
case("cast 1e-400", ["cast", "1e-400", "--to", "bf16"], phrases=("1e-400", "range"))
case("cast -inf first", ["cast", "-inf", "--to", "e4m3"], phrases=("--",))
case("cast not a number", ["cast", "zero", "--to", "bf16"], phrases=("zero",))
case("cast --to e9m9", ["cast", "1", "--to", "e9m9"], phrases=("--to",))
case("cast --round sr:0", ["cast", "1", "--to", "bf16", "--round", "sr:0"], phrases=("sr:0",))
case("cast --convention ieee", ["cast", "1", "--to", "bf16", "--convention", "ieee"], phrases=("--convention",))
case("cast --from raw too wide", ["cast", "0x1ff", "--from", "e4m3", "--to", "bf16"], phrases=("0x1ff",))

# ---------------------------------------------------------------- 3. an output that is an input
same_file = ["att.safetensors", "./att.safetensors", SCRATCH + "/att.safetensors", "hardlink.safetensors",
             "symlink.safetensors", "../" + SCRATCH_NAME + "/att.safetensors"]
for target in same_file:
    case(f"attention -o {target}", ["attention", "att.safetensors", "--recipe", "fa2-bf16", "-o", target],
         phrases=("-o", "input"))
    case(f"truth -o {target}", ["truth", "att.safetensors", "-o", target], phrases=("-o", "input"))
    case(f"cast -o {target}", ["cast", "att.safetensors", "--to", "bf16", "-o", target], phrases=("-o", "input"))
    case(f"mx -o {target}", ["mx", "att.safetensors:v", "--format", "mxfp4", "-o", target], phrases=("-o", "input"))
    case(f"mma -o {target}", ["mma", "att.safetensors", "-o", target], phrases=("-o", "input"))
    case(f"pcollapse --plot {target}", ["pcollapse", "att.safetensors", "--plot", target],
         phrases=("--plot", "input"))
    case(f"crosscheck --dump {target}", ["crosscheck", "att.safetensors", "--recipe", "fa2-bf16", "--dump", target],
         phrases=("--dump", "input"))

# ---------------------------------------------------------------- outputs that are not regular files or cannot be made
for target in ["/dev/full", "/dev/null", "folder.safetensors", "fifo.safetensors"]:
    case(f"cast -o {target}", ["cast", "vec.safetensors", "--to", "bf16", "-o", target], phrases=("-o", target))
    case(f"attention -o {target}", ["attention", "att.safetensors", "--recipe", "fa2-bf16", "-o", target],
         phrases=("-o", target))
    case(f"headroom --plot {target}", ATTENTION["headroom"] + ["--plot", target], phrases=("--plot", target))
for target in ["missing/out.safetensors", "/sys/out.safetensors", "notes.txt/out.safetensors"]:
    case(f"truth -o {target}", ["truth", "att.safetensors", "-o", target], phrases=("-o",))
    case(f"mx -o {target}", ["mx", "vec.safetensors", "--format", "mxfp8_e4m3", "-o", target], phrases=("-o",))
    case(f"leak --plot {target}", ATTENTION["leak"] + ["--plot", target], phrases=("--plot",))
    case(f"crosscheck --dump {target}", ["crosscheck", "--recipe", "fa2-bf16", "--synthetic", "--dump", target],
         phrases=("--dump",))
case("demo --out a file", ["demo", "--out", "notes.txt", "--no-plots"], phrases=("--out", "notes.txt"))
case("demo --out unwritable", ["demo", "--out", "/sys/roundscope-demo", "--no-plots"], phrases=("--out",))
# ---------------------------------------------------------------- file-system errors name the path and the operation
case("report -o through a link loop", ["report", ".", "-o", "loop-a/report"],
     phrases=("loop-a/report", "symbolic links"), absent=("standard output",))
case("report -o over-long", ["report", ".", "-o", "x" * 300 + "/report"], phrases=("xxxx", "too long"),
     absent=("standard output",))
# ---------------------------------------------------------------- options given empty or without what they need
case("report --shard ''", ["report", ".", "--shard", ""], phrases=("--shard", "empty"))
case("report --task-file ''", ["report", ".", "--run-task", "x", "--task-file", ""], phrases=("--task-file", "empty"))
case("report --tensorboard ''", ["report", ".", "--tensorboard", ""], phrases=("--tensorboard", "empty"))
case("report --seed without --rows", ["report", ".", "--seed", "3"], phrases=("--seed", "--rows"))
case("check --junit ''", ["check", ".", "--junit", ""], phrases=("--junit", "empty"))
case("report --tensorboard unwritable", ["report", ".", "--tensorboard", "/sys/roundscope-tb"],
     phrases=("--tensorboard", "/sys"))
for target in ["p.jpg", "p.txt", "plot"]:  # drawn as PNG, PDF or SVG by the name, or refused
    case(f"headroom --plot {target}", ATTENTION["headroom"] + ["--plot", target], phrases=("--plot", ".png, .pdf"))
case("probe --out a file", ["probe", "--out", "notes.txt"], rc=2 if GPU else 3)  # the GPU is looked for first
case("mx without -o", ["mx", "vec.safetensors", "--format", "mxfp4"], phrases=("-o",))

# ---------------------------------------------------------------- 4. inputs that are not tensor files
for bad, phrase in [("fifo.safetensors", "not a regular file"), ("folder.safetensors", "folder.safetensors"),
                    ("missing.safetensors", "missing.safetensors"), ("/dev/null", "/dev/null"),
                    ("truncated.safetensors", "truncated.safetensors"), ("garbage.safetensors", "garbage.safetensors"),
                    ("notes.txt", "notes.txt")]:
    case(f"inspect {bad}", ["inspect", bad], phrases=(phrase,), timeout=10)
    case(f"cast {bad}", ["cast", bad, "--to", "bf16", "-o", "x.safetensors"], phrases=(phrase,), timeout=10)
    case(f"mx {bad}", ["mx", bad, "--format", "mxfp4", "-o", "x.safetensors"], phrases=(phrase,), timeout=10)
    case(f"mma {bad}", ["mma", bad], phrases=(phrase,), timeout=10)
    for c, args in FILE_COMMANDS.items():
        case(f"{c} {bad}", args(bad), phrases=(phrase,), timeout=10)
case("inspect FILE:missing", ["inspect", "vec.safetensors:z"], phrases=("vec.safetensors", "'z'"))
case("bias: a second file without x", ["bias", "with_x.safetensors", "att.safetensors"],
     phrases=("att.safetensors", "'x'"))
case("bias: a later missing file first", ["bias", "att.safetensors", "missing.safetensors"],
     phrases=("missing.safetensors",))
case("bias: no do", ["bias", "no_do.safetensors"], phrases=("no_do.safetensors", "do"))
case("file and --synthetic", ["pcollapse", "att.safetensors", "--synthetic"], phrases=("--synthetic",))
case("neither file nor --synthetic", ["headroom"], phrases=("--synthetic",))
# Options of the synthetic inputs given with a file are errors, not silently ignored.
for c in ("pcollapse", "leak", "headroom", "bias", "attribute"):
    case(f"{c} FILE --n", FILE_COMMANDS[c]("att.safetensors") + ["--n", "64"], phrases=("--n", "--synthetic"))
for c, option, value in (("bias", "--tie-gap", "12"), ("bias", "--steps", "4"), ("bias", "--d-model", "32"),
                         ("bias", "--heads", "2"), ("pcollapse", "--sink-strength", "6"), ("headroom", "--scenario", "wide"),
                         ("crosscheck", "--seed", "3")):
    case(f"{c} FILE {option}", FILE_COMMANDS[c]("att.safetensors") + [option, value], phrases=(option, "--synthetic"))

# ---------------------------------------------------------------- 5. hostile attention files
hostile = [("d0.safetensors", ("d0.safetensors", "'q'")), ("n0.safetensors", ("n0.safetensors", "'q'")),
           ("nan.safetensors", ("nan.safetensors", "'q'", "NaN")), ("inf.safetensors", ("inf.safetensors", "'q'")),
           ("no_v.safetensors", ("no_v.safetensors", "'v'")), ("bad_k.safetensors", ("bad_k.safetensors", "'k'")),
           ("int_q.safetensors", ("int_q.safetensors", "'q'")),
           ("bad_causal.safetensors", ("bad_causal.safetensors", "causal")),
           ("bad_scale.safetensors", ("bad_scale.safetensors", "softmax_scale")),
           ("mask_nan.safetensors", ("mask_nan.safetensors", "'attn_mask'", "NaN")),
           ("mask_posinf.safetensors", ("mask_posinf.safetensors", "'attn_mask'", "+Inf")),
           ("mask_shape.safetensors", ("mask_shape.safetensors", "'attn_mask'", "broadcast")),
           ("mask_int.safetensors", ("mask_int.safetensors", "'attn_mask'", "i32")),
           ("mask_and_bias.safetensors", ("mask_and_bias.safetensors", "'attn_mask' and 'bias'")),
           ("bool_mask_shape.safetensors", ("bool_mask_shape.safetensors", "'attn_mask'", "broadcast")),
           ("gqa_3_of_2.safetensors", ("gqa_3_of_2.safetensors", "'k'", "divide")),
           ("gqa_group.safetensors", ("gqa_group.safetensors", "gqa_group")),
           ("gqa_group_text.safetensors", ("gqa_group_text.safetensors", "gqa_group", "'two'")),
           ("gqa_off.safetensors", ("gqa_off.safetensors", "enable_gqa")),
           ("alignment.safetensors", ("alignment.safetensors", "causal_alignment", "sideways")),
           ("window_neg.safetensors", ("window_neg.safetensors", "window_left")),
           ("window_text.safetensors", ("window_text.safetensors", "window_right")),
           ("softcap_nan.safetensors", ("softcap_nan.safetensors", "softcap")),
           ("softcap_neg.safetensors", ("softcap_neg.safetensors", "softcap")),
           ("dropout.safetensors", ("dropout.safetensors", "dropout")),
           ("descale.safetensors", ("descale.safetensors", "descale_q"))]
for f, phrases in hostile:
    for c, args in FILE_COMMANDS.items():
        case(f"{c} {f}", args(f), phrases=phrases)
    if f in REPORTED:  # and in a report's folder, before any task
        case(f"report {f}", ["report", "report_" + f, "-o", "rep", "--recipe", "fa2-bf16"],
             phrases=("step0_layer0.safetensors",) + phrases[1:])
# The attention problem's options given bad values on the command line.
for option, value in (("--window-left", "-2"), ("--window-right", "x"), ("--window-right", "1.5"),
                      ("--softcap", "nan"), ("--softcap", "-1"), ("--softcap", "2e6"),
                      ("--causal-alignment", "sideways")):
    for c, args in FILE_COMMANDS.items():
        case(f"{c} {option} {value}", args("att.safetensors") + [option, value], phrases=(option,))
for c in ("pcollapse", "attribute"):
    case(f"{c}: q beyond e4m3", [c, "huge_q.safetensors", "--recipe", "fa3-fp8" if c == "attribute" else "fa3-fp8"],
         phrases=("huge_q.safetensors", "'q'", "e4m3"))
for axis in ("-2", "-1"):  # an empty tensor has no blocks along either axis (docs/cli.md, mx)
    case(f"mx --axis {axis} on an empty tensor", ["mx", "empty_axis.safetensors", "--format", "mxfp4", "--axis", axis,
                                                  "-o", "empty_mx.safetensors"], rc=0, outputs=("empty_mx.safetensors",))
case("attention --backward without do", ["attention", "no_do.safetensors", "--recipe", "fa2-bf16", "--backward", "-o",
                                         "x.safetensors"], phrases=("do",))

# ---------------------------------------------------------------- 6. sizes that cannot fit, refused at once
for c, base in ATTENTION.items():
    case(f"{c}: --n 1048576 --d 1024", base[:1] + ["--synthetic", "--n", "1048576", "--d", "1024"] + base[6:],
         phrases=("needs about", "GiB"), timeout=20)
    # the largest --n: refused by the memory it needs (turn 3: by a range of 2^20 tokens)
    case(f"{c}: --n 2^31", base[:1] + ["--synthetic", "--n", str(1 << 31), "--d", "1024"] + base[6:],
         phrases=("needs about", "GiB", "N = 2147483648"), timeout=20)
case("bias --heads 4096 --n 100000", ["bias", "--synthetic", "--heads", "4096", "--n", "100000"],
     phrases=("needs about",), timeout=20)
case("crosscheck --heads 4096 --n 1048576", ["crosscheck", "--recipe", "fa2-bf16", "--synthetic", "--heads", "4096",
                                             "--n", "1048576"], phrases=("needs about",), timeout=20)

# ---------------------------------------------------------------- 9. help, version, the shared flags
for c, base in ATTENTION.items():
    case(f"{c} takes --softmax-scale, --threads, --no-causal", base + ["--softmax-scale", "0.3", "--threads", "1",
                                                                       "--no-causal"] if c != "leak" else
         base + ["--softmax-scale", "0.3", "--threads", "1"], rc=0)
case("inspect FILE:NAME", ["inspect", "vec.safetensors:y"], rc=0)
case("cast FILE:NAME", ["cast", "vec.safetensors:y", "--to", "bf16", "-o", "y.safetensors"], rc=0,
     outputs=("y.safetensors",))
case("mx FILE:NAME", ["mx", "vec.safetensors:x", "--format", "mxfp4", "-o", "x_mx.safetensors"], rc=0,
     outputs=("x_mx.safetensors",))
case("an upper-case extension", ["inspect", "UPPER.SAFETENSORS"], rc=0)
case("crosscheck (3 without a GPU)", ["crosscheck", "--recipe", "fa2-bf16", "--synthetic", "--n", "32"],
     rc=0 if GPU else 3)


# ---------------------------------------------------------------- the cases above, each alone

def test_the_suite_holds_at_least_700_cases():
    assert len(CASES) >= 700, len(CASES)
    assert len({c.name for c in CASES}) == len(CASES), "each case has a name of its own"


@pytest.mark.parametrize("c", CASES, ids=[c.name for c in CASES])
def test_case(cli, scratch, c):
    run_case(cli, scratch, c)


# ---------------------------------------------------------------- 7. full disks and failed standard output

FULL = file_size_limit(2000)


def test_a_full_disk_keeps_the_old_output(cli, scratch):
    run_case(cli, scratch, Case("cast onto a full disk", ["cast", "att.safetensors", "--to", "f32", "-o",
                                                          "old_output.safetensors"],
                                phrases=("old_output.safetensors", "write failed"), preexec=FULL,
                                outputs=("old_output.safetensors",)))
    assert open(os.path.join(scratch, "old_output.safetensors"), "rb").read() == OLD_OUTPUT


@pytest.mark.parametrize("c", [
    Case("attention onto a full disk", ["attention", "att.safetensors", "--recipe", "fa2-bf16", "-o", "full.safetensors"],
         phrases=("full.safetensors", "write failed"), preexec=FULL),
    Case("truth onto a full disk", ["truth", "att.safetensors", "-o", "full.safetensors"],
         phrases=("full.safetensors", "write failed"), preexec=FULL),
    Case("mx onto a full disk", ["mx", "vec.safetensors", "--format", "mxfp8_e4m3", "--dequant", "-o",
                                 "full.safetensors"], phrases=("full.safetensors", "write failed"),
         preexec=file_size_limit(600)),
], ids=lambda c: c.name)
def test_a_full_disk(cli, scratch, c):
    run_case(cli, scratch, c)


@pytest.mark.slow  # the whole demo runs before its first write fails
def test_the_demo_onto_a_full_disk_leaves_no_partial_json(cli, scratch):
    folder = os.path.join(scratch, "demo-full")
    c = Case("demo onto a full disk", ["demo", "--out", "demo-full", "--no-plots"], phrases=("demo.json", "write failed"),
             preexec=file_size_limit(1000), outputs=("demo-full",), timeout=120)
    before = snapshot(scratch)
    p = subprocess.run([cli.path, *c.args], cwd=scratch, capture_output=True, text=True, timeout=c.timeout,
                       preexec_fn=c.preexec)
    try:
        assert p.returncode == 2 and all(x in p.stderr for x in c.phrases), p.stderr
        assert not os.path.isdir(folder) or os.listdir(folder) == [], os.listdir(folder)
        assert set(snapshot(scratch)) - set(before) <= {"demo-full"}
    finally:
        if os.path.isdir(folder):
            for f in os.listdir(folder):
                os.remove(os.path.join(folder, f))
            os.rmdir(folder)


@pytest.mark.parametrize("args", [["formats"], ["formats", "--json"], ["recipes"], ["cast", "0.1", "--to", "bf16", "--json"],
                                  ["inspect", "vec.safetensors"], ["mma", "--list"], ATTENTION["headroom"] + ["--json"]],
                         ids=lambda a: " ".join(a[:2]))
def test_a_failed_standard_output_is_named(cli, scratch, args):
    run_case(cli, scratch, Case(f"{' '.join(args[:2])} > /dev/full", args, stdout_to_full=True,
                                phrases=("standard output",)))


# ---------------------------------------------------------------- 8. concurrent writers and signals

def run_to(cli, folder, args, target):
    return subprocess.Popen([cli.path, *args, "-o", target], cwd=folder, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


@pytest.mark.parametrize("trial", range(3))
def test_two_writers_of_one_output(cli, tmp_path, trial):
    folder = str(tmp_path)
    write_safetensors(os.path.join(folder, "vec.safetensors"), {"x": ("F32", [4, 64], f32(gaussian(256, 3)))})
    jobs = [run_to(cli, folder, ["cast", "vec.safetensors", "--to", fmt], "shared.safetensors") for fmt in ("bf16", "e4m3")]
    codes = [j.wait() for j in jobs]
    alone = []
    for fmt in ("bf16", "e4m3"):
        cli.run("cast", "vec.safetensors", "--to", fmt, "-o", f"alone_{fmt}.safetensors", cwd=folder)
        alone.append(open(os.path.join(folder, f"alone_{fmt}.safetensors"), "rb").read())
    assert codes == [0, 0], "both exit 0"
    assert open(os.path.join(folder, "shared.safetensors"), "rb").read() in alone, "the file is one of theirs"
    assert not [f for f in os.listdir(folder) if f.startswith(".shared")], "no temporary file left"


BIG = 1 << 20  # elements: a cast of a few tens of milliseconds


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    path = tmp_path_factory.mktemp("big") / "big.safetensors"
    write_safetensors(path, {"x": ("F32", [BIG], f32([1.0 + i / 1024 for i in range(BIG)]))})
    return path


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=lambda s: signal.Signals(s).name)
@pytest.mark.parametrize("delay", [0.0, 0.02, 0.05, 0.1, 0.2])
def test_a_signal_during_a_write_leaves_the_target_old_or_whole(cli, tmp_path, big, sig, delay):
    folder = str(tmp_path)
    os.symlink(big, os.path.join(folder, "big.safetensors"))
    open(os.path.join(folder, "old_output.safetensors"), "wb").write(OLD_OUTPUT)
    job = run_to(cli, folder, ["cast", "big.safetensors", "--to", "f64"], "old_output.safetensors")
    time.sleep(delay)
    job.send_signal(sig)
    code = job.wait()
    leftovers = [f for f in os.listdir(folder) if f.startswith(".old_output") or f.startswith(".roundscope")]
    content = open(os.path.join(folder, "old_output.safetensors"), "rb").read()
    assert not leftovers, leftovers
    assert content == OLD_OUTPUT or len(content) > 8 * BIG, f"{len(content)} bytes"
    assert code in (0, -sig), code


@pytest.fixture(scope="module")
def shim(tmp_path_factory):
    return build_shim(tmp_path_factory.mktemp("shim"))


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=lambda s: signal.Signals(s).name)
def test_a_signal_just_after_any_temporary_is_made_leaves_nothing_behind(cli, tmp_path, shim, sig):
    """The output folder's probe and the output's temporary file: a signal right after either is
    made (before it is removed or registered for the cleanup) leaves neither, and the old output."""
    folder = str(tmp_path)
    write_safetensors(os.path.join(folder, "vec.safetensors"), {"x": ("F32", [4, 64], f32(gaussian(256, 5)))})

    def after_each(n, code):
        names = sorted(os.listdir(folder))
        assert names == ["out.safetensors", "vec.safetensors"], (n, names)
        content = open(os.path.join(folder, "out.safetensors"), "rb").read()
        assert content == OLD_OUTPUT if code else content != OLD_OUTPUT, n
        open(os.path.join(folder, "out.safetensors"), "wb").write(OLD_OUTPUT)

    open(os.path.join(folder, "out.safetensors"), "wb").write(OLD_OUTPUT)
    made = runs_stopped_at_each_temporary(shim, [cli.path, "cast", "vec.safetensors", "--to", "bf16", "-o",
                                                 "out.safetensors"], folder, sig, after_each)
    assert made == 2, "the probe and the temporary file"


def test_the_size_guard_heeds_the_address_space_limit(cli):
    """Under `ulimit -v` the guard counts what the limit leaves, not the machine's free memory:
    a run of about 4.6 GiB under a 2 GiB limit is refused at once, naming the limit."""
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    start = time.monotonic()
    p = subprocess.run([cli.path, "headroom", "--synthetic", "--n", "100000", "--d", "1024"], capture_output=True,
                       text=True, timeout=120, preexec_fn=limit)
    assert p.returncode == 2 and "ulimit -v" in p.stderr and "GiB" in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and time.monotonic() - start < 30, p.stderr


def children_of(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=lambda s: signal.Signals(s).name)
def test_a_signal_to_roundscope_alone_while_its_plot_draws_leaves_nothing(cli, tmp_path, sig):
    """The plotting script is roundscope's child: a signal to roundscope alone (not its process
    group) ends and waits for the child before the temporary file is removed, so that the child
    cannot write it afterwards; nothing is left in the folder."""
    job = subprocess.Popen([cli.path, "pcollapse", "--synthetic", "--n", "128", "--plot", str(tmp_path / "p.png")],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    def plotting(pid):
        try:
            return b"roundscope.plot" in open(f"/proc/{pid}/cmdline", "rb").read()
        except OSError:
            return False

    deadline, child = time.monotonic() + 60, None
    while child is None and time.monotonic() < deadline and job.poll() is None:
        child = next((k for k in children_of(job.pid) if plotting(k)), None)
        time.sleep(0.005)
    assert child is not None, "the plot ran in a child process"
    time.sleep(0.2)  # the script under way (importing matplotlib)
    job.send_signal(sig)
    assert job.wait(timeout=60) == -sig
    for _ in range(100):  # the child is gone (killed and reaped by roundscope)
        if not os.path.exists(f"/proc/{child}"):
            break
        time.sleep(0.05)
    assert not os.path.exists(f"/proc/{child}"), "the script outlived roundscope"
    time.sleep(1)
    assert os.listdir(tmp_path) == [], os.listdir(tmp_path)


@pytest.mark.parametrize("args", [["inspect", "victim.safetensors", "--checksum", "--threads", "1"],
                                  ["cast", "victim.safetensors", "--to", "bf16", "-o", "v_out.safetensors", "--threads", "1"]],
                         ids=lambda a: a[0])
def test_a_file_truncated_while_read_is_one_line_never_a_signal(cli, tmp_path, args):
    victim = tmp_path / "victim.safetensors"
    write_safetensors(victim, {"x": ("F32", [1 << 25], b"\x00\x00\x80\x3f" * (1 << 25))})
    job = subprocess.Popen([cli.path, *args], cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    # Truncate once the file is mapped (not before the open, where it is merely a short file,
    # whatever the machine's load), or not at all where the run has already ended.
    deadline = time.monotonic() + 60
    while job.poll() is None and time.monotonic() < deadline and not mapped(job.pid, victim):
        time.sleep(0.001)
    if job.poll() is None:
        os.truncate(victim, 4096)
    _, err = job.communicate()
    assert job.returncode in (0, 2) and (job.returncode == 0 or "truncated" in err), f"{job.returncode}: {err}"


def mapped(pid, path):
    try:
        with open(f"/proc/{pid}/maps") as maps:
            return str(path) in maps.read()
    except OSError:
        return False


# ---------------------------------------------------------------- 9. help, version, the shared flags

@pytest.mark.parametrize("command", COMMANDS)
def test_help_shows_an_example(cli, command):
    assert "Example" in cli.run(command, "--help").stdout


DEFAULTS = {"pcollapse": ["--n", "--d", "--seed", "--k-sink", "--sink-strength", "--order", "--threads"],
            "bias": ["--n", "--heads", "--steps", "--seed", "--d-model"], "headroom": ["--scenario"],
            "truth": ["--bits"], "crosscheck": ["--scenario", "--heads"], "leak": ["--block", "--max-tokens"],
            "mx": ["--axis", "--offset", "--scale-rule"], "probe": ["--tiles", "--seed"]}


@pytest.mark.parametrize("command, options", DEFAULTS.items(), ids=list(DEFAULTS))
def test_help_shows_every_default(cli, command, options):
    out = cli.run(command, "--help").stdout
    for o in options:
        line = next((li for li in out.splitlines() if li.strip().startswith(o + " ")), "")
        assert "=" in line, (o, line)


def test_version(cli):
    assert cli.run("--version").stdout.startswith("roundscope ")

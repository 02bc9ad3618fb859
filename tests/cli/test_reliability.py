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
during a write; help, version and the contract's shared flags.

Usage: test_reliability.py ROUNDSCOPE"""
import hashlib
import os
import resource
import signal
import struct
import subprocess
import sys
import tempfile
import time

from cli_harness import check, finish, write_safetensors

BINARY = sys.argv[1]
TMP = tempfile.mkdtemp(prefix="roundscope_reliability_")
cases = 0


# ---------------------------------------------------------------- fixtures, written by hand
# (safetensors: an 8-byte header length, the JSON header, the data), so that the suite needs
# nothing but Python.

def safetensors(path, tensors, metadata=None):
    write_safetensors(os.path.join(TMP, path), tensors, metadata)


def f32(values):
    return struct.pack(f"<{len(values)}f", *values)


def gaussian(n, seed):
    import random
    r = random.Random(seed)
    return [r.gauss(0, 1) for _ in range(n)]


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
    os.makedirs(os.path.join(TMP, "with_o"), exist_ok=True)
    shape = list(t["q"][1]) if "q" in t else [h, n, d]
    safetensors(os.path.join("with_o", path), {**t, "o": ("BF16", shape, bytes(2 * h * n * d))}, metadata)


def with_o(path):
    """A file with an o where attention_file wrote one (compare needs a kernel output), else path."""
    return os.path.join("with_o", path) if os.path.exists(os.path.join(TMP, "with_o", path)) else path


attention_file("att.safetensors", metadata={"causal": "true"})
attention_file("d0.safetensors", d=0)
attention_file("n0.safetensors", n=0)
attention_file("nan.safetensors", q=[float("nan")] * (2 * 32 * 16))
attention_file("inf.safetensors", q=[float("inf")] + [0.0] * (2 * 32 * 16 - 1))
attention_file("huge_q.safetensors", q=[1e18] + [0.5] * (2 * 32 * 16 - 1))
attention_file("no_v.safetensors", drop=("v",))
attention_file("no_do.safetensors", drop=("do",))
attention_file("bad_k.safetensors", extra={"k": ("F32", [2, 32, 8], f32([0.0] * (2 * 32 * 8)))})
attention_file("int_q.safetensors", extra={"q": ("I32", [2, 32, 16], b"\0" * (4 * 2 * 32 * 16))})
attention_file("bad_causal.safetensors", metadata={"causal": "maybe"})
attention_file("bad_scale.safetensors", metadata={"softmax_scale": "nan"})
attention_file("with_x.safetensors", extra={"x": ("F32", [32, 8], f32(gaussian(32 * 8, 9)))})
safetensors("vec.safetensors", {"x": ("F32", [4, 64], f32(gaussian(256, 3))), "y": ("F32", [64], f32(gaussian(64, 4)))})
safetensors("empty_axis.safetensors", {"x": ("F32", [4, 0], b"")})
with open(os.path.join(TMP, "UPPER.SAFETENSORS"), "wb") as f:
    f.write(open(os.path.join(TMP, "vec.safetensors"), "rb").read())
with open(os.path.join(TMP, "truncated.safetensors"), "wb") as f:
    f.write(open(os.path.join(TMP, "att.safetensors"), "rb").read()[:100])
with open(os.path.join(TMP, "garbage.safetensors"), "wb") as f:
    f.write(b"\xff" * 64)
with open(os.path.join(TMP, "notes.txt"), "w") as f:
    f.write("not a tensor file\n")
os.mkfifo(os.path.join(TMP, "fifo.safetensors"))
os.mkdir(os.path.join(TMP, "folder.safetensors"))
os.link(os.path.join(TMP, "att.safetensors"), os.path.join(TMP, "hardlink.safetensors"))
os.symlink("att.safetensors", os.path.join(TMP, "symlink.safetensors"))
with open(os.path.join(TMP, "old_output.safetensors"), "wb") as f:
    f.write(b"an older output that must survive a failed run")
with open(os.path.join(TMP, "out.safetensors.partial"), "wb") as f:
    f.write(b"a user's file that happens to have this name")


# ---------------------------------------------------------------- the case runner

def snapshot():
    out = {}
    for name in os.listdir(TMP):
        path = os.path.join(TMP, name)
        if os.path.isfile(path) and not os.path.islink(path) and not name.startswith("fifo"):
            out[name] = hashlib.sha256(open(path, "rb").read()).hexdigest()
        else:
            out[name] = None
    return out


def case(name, args, rc=2, phrases=(), outputs=(), timeout=60, stdout=None, preexec=None):
    """Runs roundscope ARGS in TMP and checks the exit code, the error line, the untouched
    files and that nothing but OUTPUTS appeared. Returns (rc, stdout, stderr)."""
    global cases
    cases += 1
    before = snapshot()
    try:
        p = subprocess.run([BINARY, *map(str, args)], cwd=TMP, stdout=subprocess.PIPE if stdout is None else stdout,
                           stderr=subprocess.PIPE, text=True, timeout=timeout, preexec_fn=preexec)
        got_rc, out, err = p.returncode, p.stdout or "", p.stderr or ""
    except subprocess.TimeoutExpired:
        check(name, False, f"hung for more than {timeout} s: {args}")
        return None, "", ""
    check(f"{name}: exit {rc}", got_rc == rc, f"got {got_rc}: {args}\n{err.strip()[:400]}")
    if rc == 2:
        one_line = err.count("\n") == 1 and err.startswith("roundscope: error: ")
        check(f"{name}: one error line", one_line, repr(err[:400]))
        missing = [p for p in phrases if p not in err]
        check(f"{name}: the error names {phrases}", not missing, f"missing {missing} in {err.strip()[:300]}")
    after = snapshot()
    for file, digest in before.items():
        check(f"{name}: '{file}' untouched", after.get(file, "gone") == digest or file in outputs,
              f"{args} changed or removed {file}")
    stray = set(after) - set(before) - set(outputs)
    check(f"{name}: no stray files", not stray, f"{args} left {sorted(stray)}")
    for f in stray | set(o for o in outputs if o not in before and rc != 0):
        path = os.path.join(TMP, f)
        if os.path.isfile(path):
            os.remove(path)
    return got_rc, out, err


def remove(*names):
    for n in names:
        path = os.path.join(TMP, n)
        if os.path.exists(path):
            os.remove(path)


COMMANDS = ["formats", "cast", "inspect", "mx", "mma", "probe", "truth", "attention", "recipes", "crosscheck",
            "pcollapse", "leak", "headroom", "bias", "demo", "attribute", "compare", "check"]
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
}

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
same_file = ["att.safetensors", "./att.safetensors", os.path.join(TMP, "att.safetensors"), "hardlink.safetensors",
             "symlink.safetensors", "../" + os.path.basename(TMP) + "/att.safetensors"]
for target in same_file:
    case(f"attention -o {target}", ["attention", "att.safetensors", "--recipe", "fa2-bf16", "-o", target],
         phrases=("-o", "input"))
    case(f"truth -o {target}", ["truth", "att.safetensors", "-o", target], phrases=("-o", "input"))
    case(f"cast -o {target}", ["cast", "att.safetensors", "--to", "bf16", "-o", target], phrases=("-o", "input"))
    case(f"mx -o {target}", ["mx", "att.safetensors:v", "--format", "mxfp4", "-o", target], phrases=("-o", "input"))
    case(f"mma -o {target}", ["mma", "att.safetensors", "-o", target], phrases=("-o", "input"))
    case(f"pcollapse --plot {target}", ["pcollapse", "att.safetensors", "--plot", target],
         phrases=("--plot", "input"))

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
case("demo --out a file", ["demo", "--out", "notes.txt", "--no-plots"], phrases=("--out", "notes.txt"))
case("demo --out unwritable", ["demo", "--out", "/sys/roundscope-demo", "--no-plots"], phrases=("--out",))
GPU = os.path.exists("/dev/nvidia0")
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
           ("bad_scale.safetensors", ("bad_scale.safetensors", "softmax_scale"))]
for f, phrases in hostile:
    for c, args in FILE_COMMANDS.items():
        case(f"{c} {f}", args(f), phrases=phrases)
for c in ("pcollapse", "attribute"):
    case(f"{c}: q beyond e4m3", [c, "huge_q.safetensors", "--recipe", "fa3-fp8" if c == "attribute" else "fa3-fp8"],
         phrases=("huge_q.safetensors", "'q'", "e4m3"))
case("mx on an empty axis", ["mx", "empty_axis.safetensors", "--format", "mxfp4", "--axis", "-2", "-o",
                             "empty_mx.safetensors"], rc=0, outputs=("empty_mx.safetensors",))
remove("empty_mx.safetensors")
case("attention --backward without do", ["attention", "no_do.safetensors", "--recipe", "fa2-bf16", "--backward", "-o",
                                         "x.safetensors"], phrases=("do",))

# ---------------------------------------------------------------- 6. sizes that cannot fit, refused at once
for c, base in ATTENTION.items():
    case(f"{c}: --n 1048576 --d 1024", base[:1] + ["--synthetic", "--n", "1048576", "--d", "1024"] + base[6:],
         phrases=("needs about", "GiB"), timeout=20)
case("bias --heads 4096 --n 100000", ["bias", "--synthetic", "--heads", "4096", "--n", "100000"],
     phrases=("needs about",), timeout=20)
case("crosscheck --heads 4096 --n 1048576", ["crosscheck", "--recipe", "fa2-bf16", "--synthetic", "--heads", "4096",
                                             "--n", "1048576"], phrases=("needs about",), timeout=20)

# ---------------------------------------------------------------- 7. full disks and failed standard output
def file_size_limit(limit):
    def apply():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write then fails with EFBIG
    return apply


full = file_size_limit(2000)
case("cast onto a full disk", ["cast", "att.safetensors", "--to", "f32", "-o", "old_output.safetensors"],
     phrases=("old_output.safetensors", "write failed"), preexec=full, outputs=("old_output.safetensors",))
check("cast onto a full disk: the old output survives",
      open(os.path.join(TMP, "old_output.safetensors"), "rb").read().startswith(b"an older output"))
case("attention onto a full disk", ["attention", "att.safetensors", "--recipe", "fa2-bf16", "-o", "full.safetensors"],
     phrases=("full.safetensors", "write failed"), preexec=full)
case("truth onto a full disk", ["truth", "att.safetensors", "-o", "full.safetensors"],
     phrases=("full.safetensors", "write failed"), preexec=full)
case("mx onto a full disk", ["mx", "vec.safetensors", "--format", "mxfp8_e4m3", "--dequant", "-o", "full.safetensors"],
     phrases=("full.safetensors", "write failed"), preexec=file_size_limit(600))
case("demo onto a full disk", ["demo", "--out", "demo-full", "--no-plots"], phrases=("demo.json", "write failed"),
     preexec=file_size_limit(1000), outputs=("demo-full",), timeout=120)
if os.path.isdir(os.path.join(TMP, "demo-full")):
    check("demo onto a full disk: no partial demo.json", os.listdir(os.path.join(TMP, "demo-full")) == [],
          str(os.listdir(os.path.join(TMP, "demo-full"))))
    os.rmdir(os.path.join(TMP, "demo-full"))
with open("/dev/full", "w") as devfull:
    for args in (["formats"], ["formats", "--json"], ["recipes"], ["cast", "0.1", "--to", "bf16", "--json"],
                 ["inspect", "vec.safetensors"], ["mma", "--list"], ATTENTION["headroom"] + ["--json"]):
        case(f"{' '.join(args[:2])} > /dev/full", args, stdout=devfull, phrases=("standard output",))
p = subprocess.run([BINARY, "formats", "--json"], stdout=open("/dev/full", "w"), stderr=subprocess.PIPE, text=True)
check("a failed standard output names it", "standard output" in p.stderr and p.returncode == 2, p.stderr)

# ---------------------------------------------------------------- 8. concurrent writers and signals
def run_to(args, target):
    return subprocess.Popen([BINARY, *args, "-o", target], cwd=TMP, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


for trial in range(3):
    jobs = [run_to(["cast", "vec.safetensors", "--to", fmt], "shared.safetensors") for fmt in ("bf16", "e4m3")]
    codes = [j.wait() for j in jobs]
    cases_done = []
    for fmt in ("bf16", "e4m3"):
        subprocess.run([BINARY, "cast", "vec.safetensors", "--to", fmt, "-o", f"alone_{fmt}.safetensors"], cwd=TMP,
                       capture_output=True)
        cases_done.append(open(os.path.join(TMP, f"alone_{fmt}.safetensors"), "rb").read())
    final = open(os.path.join(TMP, "shared.safetensors"), "rb").read()
    cases += 1
    check(f"two writers of one -o (trial {trial}): both exit 0 and the file is one of theirs",
          codes == [0, 0] and final in cases_done, str(codes))
    remove("shared.safetensors", "alone_bf16.safetensors", "alone_e4m3.safetensors")
    check(f"two writers (trial {trial}): no temporary file left",
          not [f for f in os.listdir(TMP) if f.startswith(".shared")], str(os.listdir(TMP)))

big = [1.0 + i / 1024 for i in range(1 << 20)]
safetensors("big.safetensors", {"x": ("F32", [len(big)], f32(big))})
for trial, delay in enumerate((0.0, 0.02, 0.05, 0.1, 0.2)):
    for sig in (signal.SIGINT, signal.SIGTERM):
        before = snapshot()
        job = run_to(["cast", "big.safetensors", "--to", "f64"], "old_output.safetensors")
        time.sleep(delay)
        job.send_signal(sig)
        code = job.wait()
        cases += 1
        leftovers = [f for f in os.listdir(TMP) if f.startswith(".old_output") or f.startswith(".roundscope")]
        content = open(os.path.join(TMP, "old_output.safetensors"), "rb").read()
        whole = content.startswith(b"an older output") or len(content) > 8 * len(big)
        check(f"{signal.Signals(sig).name} after {delay} s: no temporary file, the target old or whole",
              not leftovers and whole and code in (0, -sig), f"code {code}, left {leftovers}, {len(content)} bytes")
        with open(os.path.join(TMP, "old_output.safetensors"), "wb") as f:
            f.write(b"an older output that must survive a failed run")

# a file truncated while it is read (memory-mapped): one line and exit 2, never SIGBUS
huge = os.path.join(TMP, "victim.safetensors")
for args in (["inspect", "victim.safetensors", "--checksum", "--threads", "1"],
             ["cast", "victim.safetensors", "--to", "bf16", "-o", "v_out.safetensors", "--threads", "1"]):
    safetensors("victim.safetensors", {"x": ("F32", [1 << 25], b"\x00\x00\x80\x3f" * (1 << 25))})
    job = subprocess.Popen([BINARY, *args], cwd=TMP, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(0.05)
    os.truncate(huge, 4096)
    _, err = job.communicate()
    cases += 1
    check(f"{args[0]} of a file truncated while read: exit 2 or 0, never a signal",
          job.returncode in (0, 2) and (job.returncode == 0 or "truncated" in err), f"{job.returncode}: {err}")
    remove("victim.safetensors", "v_out.safetensors")

# ---------------------------------------------------------------- 9. help, version, the shared flags
for c in COMMANDS:
    rc, out, err = case(f"{c} --help", [c, "--help"], rc=0)
    check(f"{c} --help shows an example", "Example" in out, out[-300:])
defaults = {"pcollapse": ["--n", "--d", "--seed", "--k-sink", "--sink-strength", "--order", "--threads"],
            "bias": ["--n", "--heads", "--steps", "--seed", "--d-model"], "headroom": ["--scenario"],
            "truth": ["--bits"], "crosscheck": ["--scenario", "--heads"], "leak": ["--block", "--max-tokens"],
            "mx": ["--axis", "--offset", "--scale-rule"], "probe": ["--tiles", "--seed"]}
for c, options in defaults.items():
    out = subprocess.run([BINARY, c, "--help"], capture_output=True, text=True).stdout
    for o in options:
        line = next((l for l in out.splitlines() if l.strip().startswith(o + " ")), "")
        check(f"{c} --help shows the default of {o}", "=" in line, line)
rc, out, err = case("--version", ["--version"], rc=0)
check("--version prints the version", out.startswith("roundscope "), out)
for c, base in ATTENTION.items():
    case(f"{c} takes --softmax-scale, --threads, --no-causal", base + ["--softmax-scale", "0.3", "--threads", "1",
                                                                       "--no-causal"] if c != "leak" else
         base + ["--softmax-scale", "0.3", "--threads", "1"], rc=0)
case("inspect FILE:NAME", ["inspect", "vec.safetensors:y"], rc=0)
case("cast FILE:NAME", ["cast", "vec.safetensors:y", "--to", "bf16", "-o", "y.safetensors"], rc=0,
     outputs=("y.safetensors",))
remove("y.safetensors")
case("mx FILE:NAME", ["mx", "vec.safetensors:x", "--format", "mxfp4", "-o", "x_mx.safetensors"], rc=0,
     outputs=("x_mx.safetensors",))
remove("x_mx.safetensors")
case("an upper-case extension", ["inspect", "UPPER.SAFETENSORS"], rc=0)
case("crosscheck (3 without a GPU)", ["crosscheck", "--recipe", "fa2-bf16", "--synthetic", "--n", "32"],
     rc=0 if GPU else 3)

print(f"{cases} cases")
check("at least 300 cases", cases >= 300, str(cases))
finish("test_reliability.py")

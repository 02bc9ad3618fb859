"""Bad input raises the Python exception that fits (ValueError, TypeError, OSError) with the
command line's own message (naming the Python argument where the command line names its flag);
arrays cross without copies."""
import os
import subprocess
import sys

import numpy as np
import pytest

import roundscope as rs
from cli_messages import python_message


def message(cli, *args):
    return cli.error(*args)


def as_argument(message, flag, argument):
    """The command line's message with the Python argument where it names the flag."""
    assert message.startswith(flag + ": "), message
    return argument + message[len(flag):]


def test_cast_errors_carry_the_cli_message(cli):
    with pytest.raises(ValueError) as e:
        rs.cast([1.0], "e9m9")
    assert str(e.value) == as_argument(message(cli, "cast", "1", "--to", "e9m9"), "--to", "to")
    with pytest.raises(ValueError) as e:
        rs.cast([1.0], "e4m3", rounding="sr:99")
    assert str(e.value) == as_argument(message(cli, "cast", "1", "--to", "e4m3", "--round", "sr:99"), "--round",
                                       "rounding")
    with pytest.raises(ValueError) as e:
        rs.cast([1.0], "e4m3", convention="intel")
    assert str(e.value) == as_argument(message(cli, "cast", "1", "--to", "e4m3", "--convention", "intel"),
                                       "--convention", "convention")
    with pytest.raises(ValueError, match="seed"):
        rs.cast([1.0], "e4m3", seed=-1)
    with pytest.raises(ValueError, match="seed"):
        rs.cast([1.0], "e4m3", seed=2**64)
    with pytest.raises(TypeError, match="complex"):
        rs.cast(np.ones(3, np.complex64), "bf16")
    with pytest.raises(TypeError, match="cpu|CPU"):
        import torch
        rs.cast(torch.ones(3, device="meta"), "bf16")


def test_file_errors_are_oserrors_with_the_cli_message(cli, tmp_path):
    missing = tmp_path / "missing.safetensors"
    with pytest.raises(OSError) as e:
        rs.read(missing)
    assert str(e.value) == message(cli, "inspect", missing)
    with pytest.raises(OSError):
        rs.write(tmp_path / "no" / "such" / "folder.safetensors", {"x": np.ones(2, np.float32)})
    corrupt = tmp_path / "corrupt.safetensors"
    corrupt.write_bytes(b"\xff" * 64)
    with pytest.raises(ValueError) as e:
        rs.read(corrupt)
    assert str(e.value) == message(cli, "inspect", corrupt)


@pytest.mark.parametrize("call", [lambda: rs.leak(synthetic=True, n=True),
                                  lambda: rs.pcollapse(synthetic=True, k_sink=False),
                                  lambda: rs.headroom(synthetic=True, seed=True)], ids=["n", "k_sink", "seed"])
def test_a_bool_where_a_number_goes_names_the_argument(call):
    """n=True must not become a bare --n that swallows the next flag ("--n: ... not '--threads'")."""
    with pytest.raises(TypeError) as e:
        call()
    assert str(e.value).split(":")[0] in ("n", "k_sink", "seed") and "--" not in str(e.value), str(e.value)


def test_attention_errors_name_the_tensor(cli, tmp_path):
    rng = np.random.default_rng(9)
    x = {n: rng.standard_normal((16, 8)).astype(np.float32) for n in "qkv"}
    x["k"][3, 2] = np.nan
    rs.write(tmp_path / "x.safetensors", x)
    with pytest.raises(ValueError) as e:
        rs.attention(x["q"], x["k"], x["v"])
    want = message(cli, "attention", tmp_path / "x.safetensors", "--recipe", "fa2-bf16", "-o",
                   tmp_path / "o.safetensors")
    assert str(e.value) == python_message(want.replace(str(tmp_path / "x.safetensors"), "<arrays>"))
    with pytest.raises(ValueError, match=r"^v: has shape \[15, 8\]"):
        rs.attention(x["q"], x["q"], np.ones((15, 8), np.float32))
    with pytest.raises(ValueError) as e:
        rs.attention(x["q"], x["q"], x["q"], recipe="fa9")
    assert str(e.value) == python_message(message(cli, "attention", tmp_path / "x.safetensors", "--recipe", "fa9", "-o",
                                                  "o.safetensors"))
    with pytest.raises(ValueError) as e:
        rs.pcollapse(k_sink=0)
    assert str(e.value) == python_message(message(cli, "pcollapse", "--synthetic", "--k-sink", "0"))
    with pytest.raises(ValueError) as e:
        rs.attention(x["q"], x["q"], x["q"], softmax_scale=float("nan"))
    assert str(e.value).startswith("softmax_scale: ") and "--" not in str(e.value), str(e.value)


PEAK = """
import resource, sys
import numpy as np
import roundscope as rs
x = np.full(2**26, 1.1, np.float32)
if sys.argv[1] == "torch":
    import torch
    x = torch.from_numpy(x)
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
y = rs.cast(x, "bf16")
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) * 1024)
"""


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_casting_a_large_array_does_not_copy_it(kind):
    # 2^26 float32 (256 MiB) in, 2^26 bf16 (128 MiB) out: a copy of the input would add 256 MiB.
    p = subprocess.run([sys.executable, "-c", PEAK, kind], capture_output=True, text=True, check=True)
    grown = int(p.stdout.split()[-1])
    assert grown < 128 * 2**20 + 32 * 2**20, f"peak memory grew by {grown / 2**20:.0f} MiB"


_Q = np.ones((4, 8), np.float32)


@pytest.mark.parametrize("call, start, suggestion", [
    (lambda: rs.cast(_Q, "e4m3", rounding="nearest"), "rounding: unknown rounding mode 'nearest'", "rne"),
    (lambda: rs.cast(_Q, "e4m3", rounding="floor"), "rounding: unknown rounding mode 'floor'", "down"),
    (lambda: rs.mx.quantize(_Q, "mxfp4", block=8, rounding="nearst"), "rounding: unknown rounding mode 'nearst'",
     "rne"),
    (lambda: rs.cast(_Q, "e4m3", convention="cdua"), "convention: unknown convention 'cdua'", "cuda"),
    (lambda: rs.cast(_Q, "E4M4"), "to: unknown format 'E4M4'", "e4m3"),
    (lambda: rs.attention(_Q, _Q, _Q, recipe="fa3-fp9"), "recipe: unknown recipe 'fa3-fp9'", "fa3-fp8"),
    (lambda: rs.attention(_Q, _Q, _Q, settings={"p_scal": 2}), "settings: unknown recipe key 'p_scal'", "p_scale"),
    (lambda: rs.headroom(synthetic=True, scenario="snk"), "scenario: 'snk' is not one of", "sink"),
    (lambda: rs.pcollapse(synthetic=True, n=64, d=16, k_sink=1000), "k_sink: 1000 sink tokens", None),
    (lambda: rs.attention(_Q, _Q, _Q[:3]), "v: has shape [3, 8]", None),
], ids=["rounding", "rounding-synonym", "mx-rounding", "convention", "format", "recipe", "settings", "scenario",
        "k_sink", "v"])
def test_errors_name_the_python_argument_and_suggest(call, start, suggestion):
    """A Python caller reads its own argument names, never a command-line flag, and the closest
    known name where the value is a misspelling of one."""
    with pytest.raises(ValueError) as e:
        call()
    text = str(e.value)
    assert text.startswith(start), text
    assert "--" not in text and "<arrays" not in text, text
    if suggestion is not None:
        assert f"; did you mean '{suggestion}'?" in text, text
    else:
        assert "did you mean" not in text, text


def test_no_library_function_writes_to_stdout_or_stderr(capfd, tmp_path):
    """Results come back as values: nothing reaches file descriptor 1 or 2 (where Jupyter's server
    log, not the notebook, would receive it, and redirect_stdout would miss it)."""
    rng = np.random.default_rng(3)
    q, k, v, do = (rng.standard_normal((32, 16)).astype(np.float32) for _ in range(4))
    kernel = rs.attention(q, k, v, backward=True, do=do, truth=True)
    rs.write(tmp_path / "x.safetensors", {"q": q, "k": k, "v": v, "do": do, "o": kernel["o"]},
             {"recipe": "fa2-bf16"})
    rs.truth(q, k, v, do, backward=True)
    rs.mma(q[:16].astype(np.float16), k[:16, :8].astype(np.float16))
    rs.pcollapse(synthetic=True, n=64, d=16)
    rs.leak(synthetic=True, n=64, d=16)
    rs.headroom(synthetic=True, n=64, d=16)
    rs.bias(synthetic=True, n=64, d=16)
    rs.attribute(synthetic=True, n=64, d=16, recipe="fa2-bf16")
    rs.compare(tmp_path / "x.safetensors", "fa2-bf16")
    rs.formats(), rs.recipes(), rs.cast(q, "e4m3"), rs.decode(rs.cast(q, "bf16"))
    rs.mx.dequantize(rs.mx.quantize(q, "mxfp4", block=16))
    rs.mx.compare_rules(q, "mxfp4", block=16)
    rs.check(tmp_path)
    out, err = capfd.readouterr()
    assert out == "" and err == "", (out, err)


TRUNCATE_AFTER_READ = """
import os, sys, numpy as np, roundscope as rs
x = np.arange(1 << 20, dtype=np.float32)
rs.write(sys.argv[1], {"x": x})
t = rs.read(sys.argv[1], mmap=sys.argv[2] == "mmap")
os.truncate(sys.argv[1], 4096)  # another process cuts the file under the arrays
try:
    print(bool(np.array_equal(t["x"], x)))
finally:
    print("finally ran")
"""


@pytest.mark.parametrize("access", ["copy", "mmap"])
def test_a_file_truncated_after_reading(tmp_path, access):
    """The arrays read stay whole: the file was read into memory (mmap=False, the default). With
    mmap=True the lost page ends the process as the command line's would (exit 2, one line),
    which is what the option documents."""
    p = subprocess.run([sys.executable, "-c", TRUNCATE_AFTER_READ, str(tmp_path / "x.safetensors"), access],
                       capture_output=True, text=True, timeout=120)
    if access == "copy":
        assert p.returncode == 0 and p.stdout == "True\nfinally ran\n", (p.returncode, p.stdout, p.stderr)
    else:
        assert p.returncode == 2 and p.stderr.endswith("was truncated or changed while it was being read\n"), \
            (p.returncode, p.stderr)


def test_a_file_that_ends_before_its_size_is_an_oserror(tmp_path):
    """A file that shrinks while it is read: a sysfs attribute stands in for one deterministically
    (its size says 4096 bytes, a read gives a few)."""
    short = tmp_path / "short.safetensors"
    short.symlink_to("/sys/devices/system/cpu/online")
    assert os.stat(short).st_size > len(open(short, "rb").read())
    for call in (lambda: rs.read(short), lambda: rs.pcollapse(short), lambda: rs.read_metadata(short)):
        with pytest.raises(OSError,
                           match=r"short.safetensors: the file was truncated or changed while it was being read$"):
            call()

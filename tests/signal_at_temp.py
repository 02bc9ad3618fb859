"""A signal at the worst moment: a run stopped just after it makes its Nth temporary file or
folder (tests/signal_at_temp.c, built here with the system's C compiler and loaded with
LD_PRELOAD), for N = 1, 2, ... until a run makes fewer and ends by itself."""
import os
import shutil
import signal
import subprocess

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "signal_at_temp.c")


def build_shim(folder):
    """The shared library, compiled into `folder`; fails (never skips) without a C compiler."""
    compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    assert compiler, "no C compiler to build the signal shim"
    library = os.path.join(str(folder), "signal_at_temp.so")
    subprocess.run([compiler, "-shared", "-fPIC", "-O1", "-o", library, SOURCE, "-ldl"], check=True)
    return library


def runs_stopped_at_each_temporary(shim, command, cwd, sig=signal.SIGTERM, after_each=None, most=400):
    """Runs `command` once per N, stopped by `sig` just after its Nth temporary, and calls
    after_each(n, exit code) after each; returns how many runs were stopped (for a command whose
    runs do not build on each other, how many temporaries a whole run makes)."""
    for n in range(1, most + 1):
        env = dict(os.environ, LD_PRELOAD=shim, SIGNAL_AT_TEMP=str(n), SIGNAL_NUMBER=str(int(sig)))
        code = subprocess.run(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              timeout=300).returncode
        if after_each:
            after_each(n, code)
        if code == 0:
            return n - 1
        assert code == -sig, f"stopped after temporary {n}: exit {code}, not the signal"
    raise AssertionError(f"still stopped after {most} temporaries")

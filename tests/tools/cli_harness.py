"""What every CLI test script shares: running the binary and counting checks.

A script calls check(name, condition, detail) for each property and finish() at the end,
which prints the failures and exits 1 if there were any."""
import subprocess
import sys

failures = []
passed = 0


def run(binary, *args, timeout=600):
    p = subprocess.run([binary, *map(str, args)], capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def check(name, condition, detail=""):
    global passed
    if condition:
        passed += 1
    else:
        failures.append(f"{name}: {detail}")


def one_line_error(rc, err, *phrases):
    """Exit code 2 and one line `roundscope: error: ...` holding every phrase."""
    return rc == 2 and err.count("\n") == 1 and err.startswith("roundscope: error: ") and all(p in err for p in phrases)


def finish(script):
    for f in failures:
        print("FAIL", f)
    print(f"{script}: {passed} checks passed, {len(failures)} failed")
    sys.exit(1 if failures else 0)

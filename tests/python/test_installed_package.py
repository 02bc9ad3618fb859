"""The package tools/setup.sh installed (pip install .) imports from site-packages, outside the
repository, and computes what the development build computes; its `roundscope` command (the
wheel's console script) is the executable's command line."""
import os
import subprocess
import sys
from pathlib import Path

PROGRAM = """
import sys
sys.path = [p for p in sys.path if p not in ("", ".")]
import numpy as np
import roundscope
x = np.array([0.1, 448.0, 465.0, 1e-3], dtype=np.float32)
print(roundscope.__file__)
print(roundscope.cast(x, "e4m3").view(np.uint8).tolist())
"""


def test_the_installed_package_imports_from_site_packages_and_casts():
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    p = subprocess.run([sys.executable, "-c", PROGRAM], cwd="/", env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    where, bits = p.stdout.splitlines()
    assert "site-packages" in where, f"roundscope imported from {where}, not from an installed package"
    assert bits == str([0x1D, 0x7E, 0x7E, 0x01])


def test_the_installed_command_is_the_command_line():
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    script = Path(sys.executable).parent / "roundscope"  # beside the environment's python, as pip puts it
    assert script.exists(), f"pip installed no roundscope command at {script}"
    p = subprocess.run([script, "cast", "448", "--to", "e4m3", "--json"], cwd="/", env=env, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0 and '"bits"' in p.stdout, p.stdout + p.stderr

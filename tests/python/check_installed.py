"""The package tools/setup.sh installed (pip install .) imports from site-packages, outside the
repository, and computes what the development build computes."""
import sys

import numpy as np

sys.path = [p for p in sys.path if p not in ("", ".")]
import roundscope  # noqa: E402

where = roundscope.__file__
if "site-packages" not in where:
    sys.exit(f"roundscope imported from {where}, not from an installed package")
x = np.array([0.1, 448.0, 465.0, 1e-3], dtype=np.float32)
bits = roundscope.cast(x, "e4m3").view(np.uint8).tolist()
if bits != [0x1D, 0x7E, 0x7E, 0x01]:
    sys.exit(f"cast into e4m3 gave {bits}")
print(f"roundscope from {where}: ok")

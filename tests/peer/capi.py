"""Where roundscope's C entry point for the peer tests is (tests/peer/roundscope_capi.cpp): ctest
names it in ROUNDSCOPE_CAPI; a run without it fails rather than skips."""
import os

import pytest


def capi_path() -> str:
    path = os.environ.get("ROUNDSCOPE_CAPI")
    if not path:
        pytest.fail("ROUNDSCOPE_CAPI names no library (ctest sets it)")
    return path

"""``patches/check``: the series, built afresh by ``patches/build`` (git keeps no .patch file),
applies with ``git am`` to the aider-chat 0.86.2 sdist, passes Aider's style, and Aider's relevant
tests plus the series' own tests pass on the result.

It downloads the sdist with pip, so it skips (one line) where PyPI is unreachable;
``AIDER_SDIST`` may name a local copy. Several minutes, most of it Aider's own tests.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

CHECK = Path(__file__).resolve().parents[2] / "patches" / "check"
SKIPPED = 77


def test_series_applies_and_aider_tests_pass():
    env = {**os.environ, "PYTHON": sys.executable}
    res = subprocess.run(["bash", str(CHECK)], capture_output=True, text=True, env=env)
    out = res.stdout + res.stderr
    if res.returncode == SKIPPED:
        pytest.skip(out.strip().splitlines()[-1])
    assert res.returncode == 0, out[-6000:]
    last = out.strip().splitlines()[-1]
    assert last.startswith("PASS:"), out[-6000:]
    assert " passed" in last and "failed" not in last

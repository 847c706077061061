"""The committed patch series must be what ``patches/build`` makes from today's modules.

Patches 3 and 4 are generated from ``aider_gardener``; a module edited without rebuilding would
leave upstream reviewers a stale copy, so the difference fails here with the files named.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PATCHES = Path(__file__).resolve().parents[2] / "patches"


def committed() -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(PATCHES.glob("[0-9][0-9][0-9][0-9]-*.patch"))}


def test_series_is_not_empty():
    names = list(committed())
    assert names, "no patches/000N-*.patch committed; run patches/build"
    assert names[0].startswith("0001-")
    numbers = [int(n[:4]) for n in names]
    assert numbers == list(range(1, len(names) + 1))


def test_committed_patches_are_fresh(tmp_path):
    res = subprocess.run(
        [sys.executable, str(PATCHES / "build"), str(tmp_path)], capture_output=True, text=True
    )
    assert res.returncode == 0, res.stdout + res.stderr
    built = {p.name: p.read_bytes() for p in sorted(tmp_path.glob("*.patch"))}
    old = committed()
    stale = sorted(n for n in built if built[n] != old.get(n))
    extra = sorted(set(old) - set(built))
    assert (
        not stale and not extra
    ), f"stale: {stale}, not built any more: {extra}; run patches/build"


def test_each_patch_has_a_real_message():
    for name, data in committed().items():
        text = data.decode("utf-8")
        head, _, _ = text.partition("\n---\n")
        assert "\nSubject: [PATCH " in head, name
        body = head.split("\n\n", 1)[1]
        assert len(body.split()) >= 40, f"{name}: commit message body is too short"
        assert "\ndiff --git a/" in text, name

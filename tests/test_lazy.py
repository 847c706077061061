"""Aider's time to the first prompt: importing the integration must not load the extractors
and compressors (hundreds of regexes), which the first message loads instead."""

from __future__ import annotations

import subprocess
import sys
import threading

from aider_gardener.lazy import lazy_module

HEAVY = (
    "aider_gardener.continuity.extract",
    "aider_gardener.compress.log",
    "aider_gardener.compress.code",
    "aider_gardener.compress.prose",
    "aider_gardener.compress.registry",
)


def test_integration_import_leaves_extractors_and_compressors_unloaded():
    code = (
        "import sys, aider_gardener.main, aider_gardener.integration;"
        f"print([m for m in {HEAVY!r} if m in sys.modules])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "[]", out.stdout


def test_tracker_loads_the_extractors_at_its_first_message():
    code = (
        "import sys\n"
        "from aider_gardener.continuity.tracker import FactTracker\n"
        "t = FactTracker()\n"
        "print('before', 'aider_gardener.continuity.extract' in sys.modules)\n"
        "t.on_output('pytest -q', 'FAILED tests/test_a.py::test_one - AssertionError', 1,"
        " exit_code=1)\n"
        "print('after', 'aider_gardener.continuity.extract' in sys.modules)\n"
        "print('errors', len(t.book.find('error')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.split("\n")[:3] == ["before False", "after True", "errors 1"], out.stdout


def test_lazy_module_imports_once_for_racing_threads():
    mod = lazy_module("json")
    results: list[object] = []
    threads = [threading.Thread(target=lambda: results.append(mod.dumps)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    import json

    assert results == [json.dumps] * 8
    assert "json" in repr(mod)

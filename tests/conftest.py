"""Test-wide setup: offline, a temp HOME, one torch thread, and the shared third-party data.

The shared data lives beside the project (``../shared/data``) and is never copied into it; tests
that need it skip cleanly when it is absent.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("GARDENER_SHARED_DATA", ROOT.parent / "shared" / "data"))
TOOL_OUTPUTS = SHARED / "tool_outputs"
TOOL_OUTPUTS_MORE = SHARED / "tool_outputs_more"
HISTORIES = SHARED / "aider_histories"
MEMORY_BENCH = SHARED / "memory_bench"

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")


@pytest.fixture(autouse=True, scope="session")
def _temp_home(tmp_path_factory):
    """Aider and chromadb write under HOME; tests must never touch the real one."""
    home = tmp_path_factory.mktemp("home")
    old = os.environ.get("HOME")
    os.environ["HOME"] = str(home)
    # one ONNX export for the whole run, also for the sessions the terminal tests spawn with a
    # HOME of their own (a user's cache is per user, not per repository either)
    os.environ.setdefault(
        "GARDENER_MODEL_CACHE", str(home / ".cache" / "aider-gardener" / "models")
    )
    yield home
    if old is not None:
        os.environ["HOME"] = old


def _shared_dir(path: Path) -> Path:
    if not path.is_dir():
        pytest.skip(f"shared test data not found at {path}")
    return path


@pytest.fixture(scope="session")
def tool_outputs_dir() -> Path:
    return _shared_dir(TOOL_OUTPUTS)


@pytest.fixture(scope="session")
def histories_dir() -> Path:
    return _shared_dir(HISTORIES)


@pytest.fixture(scope="session")
def memory_bench_dir() -> Path:
    return _shared_dir(MEMORY_BENCH)


def tool_output_files() -> list[Path]:
    """For parametrizing: every real tool output (empty when the data is absent)."""
    if not TOOL_OUTPUTS.is_dir():
        return []
    return sorted(
        p
        for p in TOOL_OUTPUTS.iterdir()
        if p.is_file()
        and p.suffix in (".log", ".txt", ".json")
        and not p.name.startswith("LICENSE")
    )


OUTPUT_SUFFIXES = (".log", ".txt", ".json", ".diff", ".yaml")


def all_tool_output_files() -> list[Path]:
    """Every real output in ``tool_outputs*`` (both folders), provenance and licence files
    excluded; empty when the data is absent."""
    found = []
    for folder in sorted(SHARED.glob("tool_outputs*")):
        if folder.is_dir():
            found += [
                p
                for p in folder.iterdir()
                if p.is_file()
                and p.suffix in OUTPUT_SUFFIXES
                and not p.name.startswith(("LICENSE", "SOURCES"))
            ]
    return sorted(found, key=lambda p: (p.parent.name, p.name))


# The longest files (minutes each: LoCoMo recall over 495 questions, Aider's own tests on the
# patched sdist) start first, so that `./dev test`'s two workers (pytest-xdist, a file each)
# end together instead of one of them starting a long file at the end.
LONG_FILES = ("tests/store/test_locomo_recall.py", "tests/patches/test_check.py")


def pytest_collection_modifyitems(config, items):
    def first(item) -> int:
        path = item.nodeid.split("::", 1)[0]
        return LONG_FILES.index(path) if path in LONG_FILES else len(LONG_FILES)

    items.sort(key=first)  # stable: everything else keeps its order

"""``patches/build`` makes the upstream series from its sources; git keeps no .patch file.

The series is built twice, into two temp directories and with a different time zone, locale,
umask and working directory, and the two must be byte-identical: the same sources always give
the same patches, so what a reviewer receives is what ``patches/check`` tested. The built series
must also be complete: one patch per ``patches/src/<patch>/``, numbered from 1, each with a real
commit message; patches 3 and 4 add every module of the package parts they carry (listed here from
the package itself, not from the build script's table); and every ``aider.gardener`` import in
the code the series adds resolves to a file that patch or an earlier one adds.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PATCHES = ROOT / "patches"
PACKAGE = ROOT / "aider_gardener"

# The package parts each library patch carries: files, or folders taken whole (every .py below).
CARRIED = {
    "0003-gardener-classify-compress": [
        "types.py",
        "tokens.py",
        "sanitize.py",
        "pipeline.py",
        "critical.py",
        "classify",
        "compress",
    ],
    "0004-gardener-store-recall": ["preload.py", "store"],
}
# Carried folders' files left out on purpose (none today: continuity, which is not in the series
# yet, keeps its own store module).
LEFT_OUT: set[str] = set()

NEW_FILE = re.compile(r"^diff --git a/(\S+) b/\1\nnew file mode \d+\n", re.M)


def build(out: Path, **kw) -> dict[str, bytes]:
    res = subprocess.run(
        [sys.executable, str(PATCHES / "build"), str(out)], capture_output=True, text=True, **kw
    )
    assert res.returncode == 0, res.stdout + res.stderr
    return {p.name: p.read_bytes() for p in sorted(out.iterdir())}


@pytest.fixture(scope="module")
def series(tmp_path_factory) -> dict[str, str]:
    built = build(tmp_path_factory.mktemp("series"))
    return {name: data.decode("utf-8") for name, data in built.items()}


def added_files(patch: str) -> dict[str, str]:
    """path -> content of every file the patch creates."""
    files = {}
    for match in NEW_FILE.finditer(patch):
        rest = patch[match.end() :]
        end = rest.find("\ndiff --git ")
        body = rest if end < 0 else rest[: end + 1]
        lines = body.split("\n@@ ", 1)[1].split("\n")[1:] if "\n@@ " in body else []
        files[match.group(1)] = "".join(line[1:] + "\n" for line in lines if line[:1] == "+")
    return files


def test_build_is_deterministic(series, tmp_path):
    """A second build, elsewhere and under other settings, gives the same bytes."""
    (tmp_path / "cwd").mkdir()
    env = {**os.environ, "TZ": "Pacific/Kiritimati", "LC_ALL": "C", "LANG": "C"}
    old_umask = os.umask(0o077)
    try:
        again = build(tmp_path / "out", env=env, cwd=tmp_path / "cwd")
    finally:
        os.umask(old_umask)
    assert sorted(again) == sorted(series)
    differ = sorted(name for name in series if again[name] != series[name].encode("utf-8"))
    assert not differ, f"patches/build is not deterministic: {differ} differ between two builds"


def test_one_patch_per_source_folder(series):
    sources = sorted(
        d.name for d in (PATCHES / "src").iterdir() if d.is_dir() and d.name[:4].isdigit()
    )
    assert sources, "no patches/src/000N-*/ folders"
    assert sorted(series) == [f"{name}.patch" for name in sources]
    assert [int(name[:4]) for name in sources] == list(range(1, len(sources) + 1))


def test_each_patch_has_a_real_message(series):
    for name, text in series.items():
        head, _, _ = text.partition("\n---\n")
        assert "\nSubject: [PATCH " in head, name
        body = head.split("\n\n", 1)[1]
        assert len(body.split()) >= 40, f"{name}: commit message body is too short"
        assert "\ndiff --git a/" in text, name


@pytest.mark.parametrize("patch", sorted(CARRIED))
def test_library_patch_carries_every_module(series, patch):
    want = set()
    for part in CARRIED[patch]:
        path = PACKAGE / part
        found = [path] if path.is_file() else sorted(path.rglob("*.py"))
        assert found, f"aider_gardener/{part} is gone: update CARRIED and patches/build"
        for module in found:
            rel = module.relative_to(PACKAGE).as_posix()
            if rel not in LEFT_OUT and "__pycache__" not in rel:
                want.add(f"aider/gardener/{rel}")
    added = set(added_files(series[f"{patch}.patch"]))
    missing = sorted(want - added)
    assert not missing, f"{patch} lacks {missing}: add them to SERIES in patches/build"


def _imports(path: str, source: str) -> list[tuple[str, list[str]]]:
    """(module, names) for every import of the file, relative ones made absolute."""
    package = path.split("/")[:-1]  # a module's package; an __init__.py's own
    found = []
    for node in ast.walk(ast.parse(source, path)):
        if isinstance(node, ast.Import):
            found += [(alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            found.append((module, [alias.name for alias in node.names]))
    return found


def test_added_code_imports_only_what_the_series_adds(series):
    """Each patch works with the patches before it: no import of a gardener module that is not
    in the series yet, and no ``aider_gardener`` left over from the rename."""
    have: dict[str, str] = {}
    problems = []
    for name in sorted(series):
        text = series[name]
        added = added_files(text)
        have.update(added)
        for path, source in added.items():
            if not path.endswith(".py"):
                continue
            if "aider_gardener" in source:
                problems.append(f"{name}: {path} still says aider_gardener")
            for module, names in _imports(path, source):
                if not module.startswith("aider.gardener"):
                    continue
                stem = module.replace(".", "/")
                if f"{stem}.py" in have:
                    continue
                init = have.get(f"{stem}/__init__.py")
                if init is None:
                    problems.append(f"{name}: {path} imports {module}, not in the series yet")
                    continue
                for item in names:  # a submodule, or a name the package's __init__ defines
                    if f"{stem}/{item}.py" in have or f"{stem}/{item}/__init__.py" in have:
                        continue
                    if item != "*" and not re.search(rf"\b{re.escape(item)}\b", init):
                        problems.append(f"{name}: {path} imports {item} from {module}: not there")
        # Aider's own files the patch edits: their added import lines.
        for module in re.findall(r"^\+\s*(?:from|import) (aider\.gardener[\w.]*)", text, re.M):
            stem = module.replace(".", "/")
            if f"{stem}.py" not in have and f"{stem}/__init__.py" not in have:
                problems.append(f"{name}: imports {module}, not in the series yet")
    assert not problems, "\n".join(problems)

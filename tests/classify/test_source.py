"""Provenance rules: extensions, fence languages and commands."""

from __future__ import annotations

import pytest

from aider_gardener.classify.source import (
    class_for_lang,
    class_for_path,
    command_class,
    expects_json,
    runner,
    viewed_file,
)
from aider_gardener.types import ContentClass as C


@pytest.mark.parametrize(
    "path,cls",
    [
        ("src/a.py", C.CODE),
        ("web/App.TSX", C.CODE),
        ("Dockerfile", C.CODE),
        ("package.json", C.STRUCTURED),
        ("yarn.lock", C.STRUCTURED),
        ("docs/README.md", C.PROSE),
        ("logs/latest.log", C.LOG),
        ("data.bin", None),
    ],
)
def test_class_for_path(path, cls):
    assert class_for_path(path) is cls


def test_class_for_lang():
    assert class_for_lang("diff") is C.EDIT
    assert class_for_lang("YAML") is C.STRUCTURED
    assert class_for_lang("bash") is C.CODE
    assert class_for_lang("rust") is C.CODE
    assert class_for_lang("text") is None and class_for_lang("") is None


def test_viewed_file_only_for_single_file_viewers():
    assert viewed_file("cat src/a.py") == "src/a.py"
    assert viewed_file("head -n 50 'my file.json'") == "my file.json"
    assert viewed_file("cat a.py b.py") is None
    assert viewed_file("cat a.py | grep x") is None
    assert viewed_file("pytest tests/a.py") is None


def test_command_class_and_runner():
    assert command_class("cat conf.yaml") is C.STRUCTURED
    assert command_class("git diff HEAD~1 -- x.py") is C.EDIT
    assert command_class("pytest -x") is None
    assert command_class(None) is None
    assert expects_json("gh api repos/o/r/issues") and not expects_json("ls -la")
    assert runner("python -m pytest -q") == "pytest"
    assert runner("npm test") == "jest"
    assert runner("go test ./...") == "go test"
    assert runner("cargo test") == "cargo"
    assert runner("mvn test") == "maven"
    assert runner("make") is None


def test_text_files_are_classified_by_their_content():
    """``.txt`` names no class: a saved pytest run is a log, a note is prose."""
    from aider_gardener.classify import classify
    from aider_gardener.types import Source

    run = "\n".join(
        [f"tests/test_big.py::test_case_{i:04d} PASSED{' ' * 10}[{i // 5:3d}%]" for i in range(500)]
        + ["FAILED tests/test_big.py::test_overflow - OverflowError: cannot fit 'int'"]
    )
    note = "\n".join(
        ["We decided to keep the parser in one module because the grammar is small."] * 20
    )
    assert class_for_path("out.txt") is None
    assert classify(run, Source(command="cat pytest-output.txt")) is C.LOG
    assert classify(run, Source(role="tool", path="pytest-output.txt")) is C.LOG
    assert classify(note, Source(command="cat notes.txt")) is C.PROSE


def test_a_verbose_make_log_is_a_log():
    """make echoes each compiler call; 200 of them read as shell code and went in uncompressed."""
    from aider_gardener.classify import classify
    from aider_gardener.types import Source

    calls = [f"gcc -O2 -Wall -Iinclude -c src/mod{i}.c -o build/mod{i}.o" for i in range(200)]
    calls.insert(100, "src/mod99.c:12:5: error: 'foo' undeclared (first use in this function)")
    calls.append("make: *** [Makefile:20: build/mod99.o] Error 1")
    log = "\n".join(calls)
    assert classify(log, Source(command="make")) is C.LOG
    assert classify(log, Source(role="tool")) is C.LOG
    kbuild = "\n".join(f"  CC      drivers/net/eth{i}.o" for i in range(50))
    assert classify(kbuild, Source(command="make")) is C.LOG

"""Structured data: whole JSON / JSON Lines, and JSON or lockfile blocks embedded in a log."""

from __future__ import annotations

import json

from aider_gardener.classify.structured import find_blocks, is_json


def test_is_json_accepts_documents_and_json_lines_only():
    assert is_json('{"a": [1, 2, {"b": null}]}')
    assert is_json("  [1, 2, 3]\n")
    assert is_json('{"a": 1}\n{"a": 2}\n{"a": 3}\n')
    assert not is_json('{"a": 1,}')  # trailing comma
    assert not is_json("{ not json at all }")
    assert not is_json("plain text")
    assert not is_json("[" * 50_000 + "]" * 50_000)  # too deep for json: no RecursionError


def test_embedded_json_block_is_found_with_exact_bounds():
    doc = json.dumps({"name": "x", "deps": {f"p{i}": f"^{i}.0.0" for i in range(8)}}, indent=2)
    text = "npm manifest:\n" + "\n".join("  " + x for x in doc.split("\n")) + "\nTrace: done\n"
    ((s, e, fmt),) = find_blocks(text)
    assert fmt == "json"
    assert json.loads(text[s:e]) == json.loads(doc)
    assert text[:s] == "npm manifest:\n" and text[e:] == "Trace: done\n"


def test_small_or_broken_bracket_blocks_are_not_structured():
    assert find_blocks("result:\n{\n  a: 1\n}\n") == []  # JS object literal, too small anyway
    broken = "{\n" + "".join(f'  "k{i}": {i},\n' for i in range(10)) + "  oops\n}\n"
    assert find_blocks(broken) == []


def test_yarn_lockfile_run_is_found():
    entries = "".join(
        f'  "pkg{i}@^1.0.{i}", pkg{i}@~1.0:\n    version "1.0.{i}"\n'
        f'    resolved "https://registry.yarnpkg.com/pkg{i}/-/pkg{i}-1.0.{i}.tgz#abc"\n'
        f'    dependencies:\n      dep{i} ">= 0.2 < 0.3"\n\n'
        for i in range(6)
    )
    text = "Lockfile:\n  # yarn lockfile v1\n\n" + entries + "Trace:\n  Error: canceled\n"
    ((s, e, fmt),) = find_blocks(text)
    assert fmt == "yarn.lock"
    assert text[s:e].startswith("  # yarn lockfile v1") and "pkg5" in text[s:e]
    assert "Trace:" not in text[s:e]


def test_many_unmatched_brackets_stay_cheap_and_find_nothing():
    assert find_blocks("{\n" * 20_000) == []

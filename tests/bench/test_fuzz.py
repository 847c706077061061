"""bench.fuzz stays working: a few hundred inputs keep every promise, and its checks catch a
pipeline that breaks them (the full 20,000-input run is ``python -m bench.fuzz``)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from aider_gardener.pipeline import compress
from bench import fuzz


def test_a_few_hundred_inputs_keep_every_promise(tmp_path):
    report = fuzz.run(400, seed=7, max_size=48_000, out_dir=tmp_path / "failed", reruns=0)
    assert report.n == 400
    failed = {name: report.failures[name] for name in ("crash", "longer", "not_idempotent")}
    assert failed == dict.fromkeys(failed, 0), fuzz.summary(report)


def test_every_kind_is_generated_and_generation_is_deterministic():
    first = [(c.kind, c.data, c.source, c.cls) for c in fuzz.cases(600, 3, [], max_size=2000)]
    again = [(c.kind, c.data, c.source, c.cls) for c in fuzz.cases(600, 3, [], max_size=2000)]
    assert first == again
    assert {kind for kind, *_ in first} == set(fuzz.GENERATORS)
    assert any(isinstance(data, str) for _, data, *_ in first)
    assert any(isinstance(data, bytes) for _, data, *_ in first)


def test_real_outputs_are_read_in_place_and_mutated(tool_outputs_dir):
    corpus = fuzz.real_files(tool_outputs_dir.parent)
    assert corpus and all(p.parent.name in fuzz.REAL_DIRS for p in corpus)
    real = [c for c in fuzz.cases(300, 5, corpus, max_size=20_000) if c.kind == "real"]
    whole = {p.read_bytes() for p in corpus}
    assert len(real) > 20 and sum(c.data not in whole for c in real) > len(real) // 2


def test_absent_data_is_skipped_cleanly(tmp_path):
    report = fuzz.run(30, seed=1, data_dir=tmp_path / "absent", max_size=2000, reruns=0)
    assert report.n == 30 and report.real_files == 0 and report.data_dir is None


def _broken(kind):
    def compress_fn(data, source=None, cls=None):
        result = compress(data, source=source, cls=cls)
        text = result.original
        if kind == "crash" and len(text) > 100:
            raise ValueError("boom")
        if kind == "longer" and text:
            return replace(result, summary=text + " and more")
        if kind == "not_idempotent" and text:
            return replace(result, summary=result.summary + "!")
        return result

    return compress_fn


@pytest.mark.parametrize("kind", ["crash", "longer", "not_idempotent"])
def test_the_checks_catch_a_pipeline_that_breaks_a_promise(tmp_path, kind):
    out = tmp_path / "failed"
    report = fuzz.run(40, seed=2, max_size=3000, out_dir=out, compress_fn=_broken(kind), reruns=0)
    assert report.failures[kind] > 0 and not report.ok
    records = [json.loads(line) for line in (out / "failures.jsonl").read_text().splitlines()]
    assert {r["check"] for r in records} >= {kind}
    saved = out / next(r["file"] for r in records if r["check"] == kind)
    assert saved.is_file()
    assert f"{fuzz.LABELS[kind]}: {report.failures[kind]}" in fuzz.summary(report)


def test_a_saved_input_replays(tmp_path, capsys):
    case = fuzz.Case(0, "nuls", 1, 100, ("tool", None, None), None, data="a\x00b")
    path = fuzz._save(case, "crash", "for the test", tmp_path)
    assert fuzz.replay(path / "00000-nuls-crash.str") == 0
    assert "00000-nuls-crash.str" in capsys.readouterr().out


def test_rerun_measures_how_time_grows_with_size():
    case = fuzz.Case(0, "whitespace", 11, 20_000, (None, None, None), None)
    row = fuzz.rerun(case, [], None)
    assert row["sizes"][1] > row["sizes"][0] and row["sizes"][2] > row["sizes"][1]
    assert len(row["seconds"]) == 3 and row["exponent"] is not None

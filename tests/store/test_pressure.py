"""The pressure report, checked against the entries table it summarizes."""

from __future__ import annotations

import pytest

from aider_gardener.store import Store
from aider_gardener.store.pressure import EVICT_MIN_TOKENS, context_pressure, recommend
from aider_gardener.types import Source
from tests.conftest import tool_output_files

pytestmark = pytest.mark.filterwarnings("ignore")


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "gs", vectors=False)
    yield s
    s.close()


def test_empty_store(store):
    report = context_pressure(store)
    assert report["entries"] == 0 and report["tokens_original"] == 0
    assert report["ratio"] == 1.0 and report["by_class"] == {}
    assert report["eviction_candidates"] == []
    assert report["recommendation"] == "Nothing tracked yet."


def test_report_matches_the_entries_on_real_outputs(store, tool_outputs_dir):
    files = [p for p in tool_output_files() if p.stat().st_size < 300_000]
    assert files
    entries = [store.ingest(p.read_bytes(), Source(role="tool")) for p in files]
    entries.append(store.ingest("please make the tests pass", Source(role="user"), cls="prompt"))
    store.pin(entries[0].id)
    report = context_pressure(store, limit=4)

    active = store.list_entries(limit=1000)
    assert report["entries"] == len(active) == len({e.id for e in entries})
    assert report["tokens_original"] == sum(e.tokens_original for e in active)
    assert report["tokens_summary"] == sum(e.tokens_summary for e in active)
    assert report["saved"] == report["tokens_original"] - report["tokens_summary"]
    assert report["ratio"] == pytest.approx(
        report["tokens_summary"] / report["tokens_original"], abs=1e-4
    )
    for cls, row in report["by_class"].items():
        mine = [e for e in active if e.cls == cls]
        assert row["count"] == len(mine)
        assert row["original"] == sum(e.tokens_original for e in mine)
        assert row["summary"] == sum(e.tokens_summary for e in mine)
        assert row["ratio"] == pytest.approx(row["summary"] / row["original"], abs=1e-4)
    assert sum(r["count"] for r in report["by_class"].values()) == report["entries"]

    cands = report["eviction_candidates"]
    assert len(cands) == 4
    prios = [c["priority"] for c in cands]
    assert prios == sorted(prios)
    assert entries[0].id not in {c["id"] for c in cands}  # pinned
    lowest = min((e for e in active if not e.pinned), key=lambda e: e.priority)
    assert cands[0]["priority"] == pytest.approx(lowest.priority, abs=0.01)
    for c in cands:
        assert c["tokens"] == store.get(c["id"]).tokens_summary
    assert report["pinned"] == 1
    assert report["pending_embeddings"] == store.pending_count() > 0
    assert isinstance(report["recommendation"], str) and "\n" not in report["recommendation"]


def test_forgotten_entries_leave_the_report(store):
    a = store.ingest("INFO one thing happened\n" * 50, cls="log")
    store.ingest("INFO another thing\n" * 50, cls="log")
    before = context_pressure(store)
    store.forget(a.id)
    after = context_pressure(store)
    assert after["entries"] == before["entries"] - 1
    assert after["tokens_original"] == before["tokens_original"] - a.tokens_original


def test_session_scope_counts_only_this_session(tmp_path):
    folder = tmp_path / "gs"
    with Store(folder, vectors=False) as old:
        old.ingest("INFO from an earlier session\n" * 30, cls="log")
    with Store(folder, vectors=False, scope="session") as s:
        assert context_pressure(s)["entries"] == 0
        s.ingest("INFO from this session\n" * 30, cls="log")
        assert context_pressure(s)["entries"] == 1
    with Store(folder, vectors=False) as proj:
        assert context_pressure(proj)["entries"] == 2


def _report(**kw):
    base = {
        "entries": 10,
        "tokens_original": 50_000,
        "tokens_summary": 10_000,
        "ratio": 0.2,
        "saved": 40_000,
        "eviction_candidates": [],
    }
    base.update(kw)
    return base


def test_recommendations():
    big = [{"id": f"id{i}", "tokens": 1500} for i in range(5)]
    assert recommend(_report(eviction_candidates=big)).startswith("Evict 5 low-priority")
    assert "id0, id1, id2, …" in recommend(_report(eviction_candidates=big))
    small = [{"id": "x", "tokens": EVICT_MIN_TOKENS - 1}]
    assert recommend(_report(eviction_candidates=small)).startswith("Healthy")
    assert recommend(_report(ratio=0.9, tokens_summary=45_000)).startswith(
        "Compression saves little"
    )
    assert recommend(_report(eviction_candidates=small), budget=11_000).startswith("High pressure")
    assert recommend(_report(entries=0)) == "Nothing tracked yet."


def test_budget_is_reported(store):
    e = store.ingest("INFO x\n" * 400, cls="log")
    report = context_pressure(store, budget=e.tokens_summary)
    assert not context_pressure(store, budget=100 * e.tokens_summary)["recommendation"].startswith(
        "High"
    )
    assert report["budget"] == e.tokens_summary and report["recommendation"].startswith(
        "High pressure"
    )


def test_session_scope_on_a_project_store(tmp_path):
    """The chat's report asks for this session's entries even when recall searches the whole
    project: an entry met again in this session counts, the project total is one line beside."""
    folder = tmp_path / "gs"
    with Store(folder, vectors=False) as old:
        seen_again = old.ingest("INFO cache warmed in 12 ms\n" * 40, cls="log")
        only_old = old.ingest("INFO from an earlier session\n" * 30, cls="log")
    with Store(folder, vectors=False) as s:
        assert s.scope == "project"
        s.ingest("ERROR ZebraTimeout in app/frobnicate.py:42\n" * 5, Source(role="tool"))
        again = s.ingest("INFO cache warmed in 12 ms\n" * 40, cls="log")
        assert again.id == seen_again.id
        mine = context_pressure(s, scope="session")
        whole = context_pressure(s)
    assert mine["scope"] == "session" and whole["scope"] == "project"
    assert mine["entries"] == 2 and whole["entries"] == 3
    assert mine["project"] == whole["project"]
    assert mine["project"]["entries"] == 3
    assert mine["project"]["tokens_original"] == whole["tokens_original"]
    assert only_old.id in {c["id"] for c in whole["eviction_candidates"]}
    assert only_old.id not in {c["id"] for c in mine["eviction_candidates"]}
    assert mine["tokens_original"] < whole["tokens_original"]

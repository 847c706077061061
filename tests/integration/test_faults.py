"""Fault injection: whatever part of the gardener breaks, Aider's session carries on with plain
Aider behaviour for that step and one warning."""

from __future__ import annotations

import pytest
from aider.sendchat import sanity_check_messages

import aider_gardener.integration.mixin as mixin_mod
from aider_gardener.types import ContentClass
from tests.integration.helpers import text_of

LOG = "".join(f"INFO job step {i} finished in {i % 17} ms\n" for i in range(2500))


class Boom(RuntimeError):
    pass


def _raise(*args, **kwargs):
    raise Boom("injected fault")


def _session_survives(coder, llm, repo, capsys):
    """Two turns and a large /run output; returns everything printed."""
    (repo / "big.log").write_text(LOG)
    llm.replies = ["First answer.", "Second answer."]
    coder.run(with_message="what does app.py do?")
    coder.commands.cmd_run("cat big.log")
    coder.run(with_message="anything wrong in big.log?")
    assert len(llm.requests) == 2
    assert coder.cur_messages[-1]["content"] == "Second answer."
    for request in llm.requests:
        assert sanity_check_messages(request)
    out = capsys.readouterr()
    return out.out + out.err


def test_store_ingest_raising(make_coder, llm, repo, capsys, monkeypatch):
    from aider_gardener.store import Store

    monkeypatch.setattr(Store, "ingest", _raise)
    coder = make_coder(max_output=500)
    text = _session_survives(coder, llm, repo, capsys)
    assert text.count("gardener: store failed") == 1
    assert "step 2499 finished" in text_of(llm.last)  # not stored, so kept whole (plain Aider)


def test_store_open_raising(make_coder, llm, repo, capsys, monkeypatch):
    import aider_gardener.store as store_pkg

    monkeypatch.setattr(store_pkg, "open_store", _raise)
    coder = make_coder(max_output=500)
    text = _session_survives(coder, llm, repo, capsys)
    assert text.count("could not open the store") == 1


def test_embedder_raising_leaves_full_text_recall(make_coder, llm, repo, capsys, monkeypatch):
    import aider_gardener.store.vectors as vectors

    monkeypatch.setattr(vectors, "open_index", _raise)
    coder = make_coder(max_output=500, vectors=True)
    _session_survives(coder, llm, repo, capsys)
    store = coder.gardener.store
    assert store is not None and store.vectors is None
    assert store.recall("step 2499 finished")  # FTS5 still finds it


@pytest.mark.parametrize("cls", [c for c in ContentClass if c is not ContentClass.PROMPT])
def test_each_compressor_raising(make_coder, llm, repo, capsys, monkeypatch, cls):
    from aider_gardener.compress import COMPRESSORS

    if cls in COMPRESSORS:
        monkeypatch.setitem(COMPRESSORS, cls, _raise)
    coder = make_coder(max_output=500)
    text = _session_survives(coder, llm, repo, capsys)
    assert "Traceback" not in text


def test_all_compressors_raising_fall_back_to_head_tail(make_coder, llm, repo, capsys, monkeypatch):
    from aider_gardener.compress import COMPRESSORS

    for cls in list(COMPRESSORS):
        monkeypatch.setitem(COMPRESSORS, cls, _raise)
    coder = make_coder(max_output=500)
    _session_survives(coder, llm, repo, capsys)
    run = next(m for m in coder.cur_messages if "cat big.log" in m["content"])
    assert "compressor failed" in run["content"]  # head/tail, and it says so
    assert "[full output stored: id=" in run["content"]


@pytest.mark.parametrize("name", ["evict", "sync", "inject", "incremental_view"])
def test_gardener_steps_raising(make_coder, llm, repo, capsys, monkeypatch, name):
    monkeypatch.setattr(mixin_mod, name, _raise)
    coder = make_coder(max_output=500, mode="incremental" if name == "incremental_view" else "rag")
    text = _session_survives(coder, llm, repo, capsys)
    assert text.count("injected fault") == 1  # one warning, however many turns


def test_recall_raising(make_coder, llm, repo, capsys, monkeypatch):
    from aider_gardener.store import Store

    monkeypatch.setattr(Store, "recall", _raise)
    coder = make_coder(max_output=500)
    text = _session_survives(coder, llm, repo, capsys)
    assert text.count("gardener: recall failed") == 1

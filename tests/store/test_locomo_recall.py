"""Recall quality on real conversations: the LoCoMo evaluation of ``bench/locomo_recall.py``.

Three real conversations (1,451 turns, 495 questions with evidence) go into real stores; every
question is recalled in three modes. Takes about a minute on two cores.
"""

from __future__ import annotations

import pytest

from bench import locomo_recall

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

GOAL_AT_5 = 0.80  # the goal for hybrid recall@5
FLOOR_AT_5 = 0.73  # measured 0.751 (turns alone; the store adds the reply context): below is a
# regression, not noise


@pytest.fixture(scope="module")
def report(memory_bench_dir):
    path = memory_bench_dir / "locomo_dev3.json"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    return locomo_recall.run(path)


def test_every_question_with_evidence_is_asked(report, memory_bench_dir):
    convs = locomo_recall.load(memory_bench_dir / "locomo_dev3.json")
    assert report["questions"] == sum(len(c.questions) for c in convs) > 400
    assert [c["sample_id"] for c in report["conversations"]] == [c.sample_id for c in convs]


def test_recall_grows_with_k(report):
    for mode, r in report["recall"].items():
        assert 0 < r["@1"] <= r["@5"] <= r["@10"] <= 1, mode


def test_hybrid_beats_each_ranker_alone(report):
    r = report["recall"]
    for k in ("@5", "@10"):
        assert r["hybrid"][k] > r["fts"][k], k
        assert r["hybrid"][k] > r["vector"][k], k


def test_hybrid_recall_at_5_floor(report):
    assert report["recall"]["hybrid"]["@5"] >= FLOOR_AT_5, locomo_recall.format_table(report)


def test_rerank_beats_the_fused_order(report):
    """What /recall runs (``store/rerank.py``, then ``store/phrases.py``): measured 0.796
    against 0.751 at 5 with the int8 weights (decision 095; 0.782 without the phrase step)."""
    r = report["recall"]
    assert r["rerank"]["@5"] >= r["hybrid"]["@5"] + 0.02, locomo_recall.format_table(report)
    assert r["rerank"]["@1"] > r["hybrid"]["@1"], locomo_recall.format_table(report)


@pytest.mark.xfail(
    reason="goal not reached: hybrid recall@5 measures 0.751 on turns as Aider sends them and"
    " 0.796 reranked as /recall runs it (decision 095); the fusion of the two"
    " rankers is at a plateau (see the"
    " recall module docstring)"
)
def test_hybrid_recall_at_5_goal(report):
    assert report["recall"]["rerank"]["@5"] >= GOAL_AT_5, locomo_recall.format_table(report)


def test_turn_text_carries_date_speaker_caption_and_context():
    turn = {"speaker": "Mel", "text": "Look at this!", "blip_caption": "a photo of a dog"}
    prev = {"speaker": "Caro", "text": "Did you get a pet?"}
    text = locomo_recall.turn_text(turn, "1:56 pm on 8 May, 2023", [prev])
    assert text.splitlines() == [
        "[1:56 pm on 8 May, 2023] Mel: Look at this!",
        "[Mel shared a photo: a photo of a dog]",
        "(in reply to Caro: Did you get a pet?)",
    ]


def test_longmemeval_haystacks_load_as_conversations(memory_bench_dir):
    path = memory_bench_dir / locomo_recall.LONGMEMEVAL.name
    if not path.is_file():
        pytest.skip(f"{path} not found")
    convs = locomo_recall.load(path)
    assert len(convs) == 3 and sum(len(c.questions) for c in convs) == 26
    for conv in convs:
        known = {t.dia_id for t in conv.turns}
        assert all(set(q.evidence) <= known and q.evidence for q in conv.questions)
        assert all(t.text.startswith("[20") for t in conv.turns)  # "[2023/05/20 (Sat) 02:21] "


def test_longmemeval_sessions_in_date_order_and_evidence_by_session():
    data = [
        {
            "question_id": "q1",
            "questions": ["What colour is the car?", "Unanswerable?"],
            "answers": ["red", "n/a"],
            "answer_session_ids": [["s2"], ["gone"]],
            "haystack_dates": ["2023/05/21 (Sun) 10:00", "2023/05/20 (Sat) 09:00"],
            "haystack_session_ids": ["s2", "s1"],
            "haystack_sessions": [
                [
                    {"role": "user", "content": "I bought a red car."},
                    {"role": "assistant", "content": " "},
                ],
                [{"role": "user", "content": "Hello."}, {"role": "assistant", "content": "Hi!"}],
            ],
        }
    ]
    (conv,) = locomo_recall.load_longmemeval(data)
    assert [t.dia_id for t in conv.turns] == ["s1#0", "s1#1", "s2#0"]  # blank turn skipped
    assert conv.turns[2].text == "[2023/05/21 (Sun) 10:00] user: I bought a red car."
    assert [(q.question, q.evidence) for q in conv.questions] == [
        ("What colour is the car?", ["s2#0"])
    ]
    assert conv.skipped == 1

"""Query terms and the FTS5 expression: what a search means to the store."""

from __future__ import annotations

from aider_gardener.store.query import MAX_QUERY_TERMS, build_match, cjk_pairs, query_terms


def test_query_terms():
    assert query_terms("What did Caroline paint in the garden?") == ["Caroline", "paint", "garden"]
    terms = query_terms("why does src/store/db.py:120 fail with get_entries")
    assert terms[0] == "src/store/db.py:120"
    for part in ("src", "store", "db.py", "120", "get_entries", "entries", "fail"):
        assert part in terms
    assert "get" not in terms  # stopword part
    assert "context pressure" in query_terms("ContextPressure")
    assert len(query_terms(" ".join(f"word{i}" for i in range(200)))) == MAX_QUERY_TERMS
    assert build_match("the and of") is None
    assert build_match('say "hi"') == '"hi"'


def test_cjk_runs_are_searched_by_character_pairs():
    assert cjk_pairs("构建失败 then ビルド") == "构建 建失 失败 ビル ルド"
    assert cjk_pairs("no cjk here, 中") == ""
    assert len(cjk_pairs("".join(chr(0x4E00 + i) for i in range(50)), limit=10).split()) == 10
    terms = query_terms("为什么构建失败？")
    assert terms[0] == "为什么构建失败" and {"构建", "失败"} <= set(terms)

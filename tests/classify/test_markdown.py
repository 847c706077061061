"""Block scanning of chat messages: edit blocks first, then fences, then bare diffs."""

from __future__ import annotations

from aider_gardener.classify.markdown import scan
from aider_gardener.classify.textlines import Lines


def blocks(text):
    L = Lines(text)
    return [(b.kind, L.lines[b.a], b.path, b.lang) for b in scan(L)], scan(L)


def test_edit_block_variants_claim_their_path_and_fences():
    for text, path in [
        ("a/b.py\n```python\n<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> REPLACE\n```\n", "a/b.py"),
        ("```python\na/b.py\n<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> REPLACE\n```\n", "a/b.py"),
        ("a/b.py\n<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> REPLACE\n", "a/b.py"),
        (
            "```ts\nweb/x.ts\n```python\n<<<<<<< SEARCH\n=======\ny\n>>>>>>> REPLACE\n```\n",
            "web/x.ts",
        ),
        (
            "**src/x.js**\n```js\n<<<<<<< ORIGINAL\na\n=======\nb\n>>>>>>> UPDATED\n```\n",
            "src/x.js",
        ),
    ]:
        found, raw = blocks(text)
        assert [f[0] for f in found] == ["sr"], text
        assert found[0][2] == path
        assert raw[0].a == 0 and Lines(text).offset(raw[0].b) == len(text)


def test_several_edit_blocks_in_one_fence_are_one_block():
    text = (
        "x.py\n```python\n<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE\n\n"
        "<<<<<<< SEARCH\nc\n=======\nd\n>>>>>>> REPLACE\n```\nafter\n"
    )
    found, raw = blocks(text)
    assert len(raw) == 1 and Lines(text).lines[raw[0].b] == "after"


def test_fences_match_by_length_and_char():
    text = "````md\n```py\ncode\n```\n````\ntext\n~~~\nx\n~~~\n"
    found, raw = blocks(text)
    assert [(f[0], f[3]) for f in found] == [("fence", "md"), ("fence", "")]
    assert Lines(text).lines[raw[0].b] == "text"


def test_caret_and_tilde_marker_lines_are_not_fences():
    text = 'File "x.py", line 1\n    a + b\n    ~~^~~\nTypeError: x\n'
    assert scan(Lines(text)) == []


def test_bare_unified_diff_in_prose():
    text = "Patch:\ndiff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\nThanks\n"
    found, raw = blocks(text)
    assert found == [("diff", "diff --git a/x b/x", "x", "diff")]
    assert Lines(text).lines[raw[0].b] == "Thanks"


def test_truncated_edit_block_runs_to_the_end():
    text = "x.py\n```python\n<<<<<<< SEARCH\na = 1\n=======\n"
    _, raw = blocks(text)
    assert raw[0].kind == "sr" and raw[0].b == len(Lines(text).lines)

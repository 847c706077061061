"""The prose compressor: extractive TextRank that keeps facts, frames and markdown layout."""

from __future__ import annotations

import re
import sysconfig
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aider_gardener.compress.prose import MARKER_RE, compress_prose, split_sentences
from aider_gardener.tokens import count_tokens
from aider_gardener.types import CompressOptions
from tests.critical_facts import missing_facts

AIDER_DOCS = Path(sysconfig.get_paths()["purelib"]) / "aider" / "website" / "docs"

# Plain sentences without digits, names or code, so that only ranking decides their fate.
FILLER = [
    "The garden needs water when the weather turns warm and dry.",
    "Most plants prefer a little shade during the hottest part of the day.",
    "Careful pruning keeps the shrubs healthy and encourages new growth.",
    "Weeds compete with young plants for light and for nutrients in the soil.",
    "A layer of mulch keeps moisture in the ground for much longer.",
    "Some gardeners like to plant flowers that attract bees and butterflies.",
    "Compost made from kitchen scraps feeds the soil in a gentle way.",
    "Birds often visit gardens that offer seeds, water and safe places to rest.",
    "Tall grasses move beautifully in the wind and need very little care.",
    "Planting in groups makes a garden look calm and deliberate.",
]


def _opts(**kw) -> CompressOptions:
    return CompressOptions(**kw)


def _run(text: str, opts: CompressOptions | None = None) -> str:
    """Compress, and check the guarantees every input must meet."""
    opts = opts or _opts()
    out = compress_prose(text, opts).text
    assert len(out) <= len(text)
    assert compress_prose(out, opts).text == out, "re-compressing changed the output"
    return out


def _essay(paragraphs: int = 6, per: int = 6) -> str:
    paras = []
    for p in range(paragraphs):
        paras.append(" ".join(FILLER[(p + i) % len(FILLER)] for i in range(per)))
    return "\n\n".join(paras)


def _kept_pieces(out: str) -> list[str]:
    """The verbatim pieces of an output: lines split at gap markers, marker line removed."""
    pieces = []
    for line in out.splitlines():
        if MARKER_RE.match(line):
            continue
        for piece in re.split(r"\s*… ?(?:\[mentions: [^\]]*\])?\s*", line):
            if piece.strip():
                pieces.append(piece.strip())
    return pieces


# --- sentence splitting ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            "Use a tool, e.g. black. It formats code.",
            ["Use a tool, e.g. black.", "It formats code."],
        ),
        ("Install v0.86.2 now. It is out.", ["Install v0.86.2 now.", "It is out."]),
        ("Edit foo.py first. Then run it.", ["Edit foo.py first.", "Then run it."]),
        ("See https://example.com/a.b/c. Done.", ["See https://example.com/a.b/c.", "Done."]),
        ("Pi is 3.14 here. Next one.", ["Pi is 3.14 here.", "Next one."]),
        ("Why? Because. Really!", ["Why?", "Because.", "Really!"]),
        ("It works, i.e. It passes.", ["It works, i.e. It passes."]),
        ("Version 2. Then 3 more.", ["Version 2.", "Then 3 more."]),
    ],
)
def test_split_sentences(text, expected):
    assert split_sentences(text) == expected


# --- what is kept ----------------------------------------------------------------------------


def test_short_texts_are_returned_unchanged():
    three = " ".join(FILLER[:3])
    assert compress_prose(three, _opts()).text == three
    tiny = "Short. Text. Here. Now."
    assert compress_prose(tiny, _opts()).text == tiny


def test_plain_prose_lands_near_the_target_ratio():
    text = _essay(8, 8)
    out = _run(text)
    ratio = count_tokens(out) / count_tokens(text)
    assert 0.4 <= ratio <= 0.65
    m = MARKER_RE.search(out)
    assert m
    kept, total = map(int, re.findall(r"\d+", m.group(0)))
    assert total == 64 and kept < total


def test_first_and_last_sentence_of_each_paragraph_survive_in_order():
    text = _essay(5, 6)
    out = _run(text)
    pieces = _kept_pieces(out)
    for para in text.split("\n\n"):
        sents = split_sentences(para)
        assert sents[0] in out and sents[-1] in out
    positions = [text.find(p) for p in pieces]
    assert all(p >= 0 for p in positions), "every kept piece is verbatim from the original"


def test_sentences_with_facts_are_kept():
    facts = [
        "Call load_config() before anything else.",
        "The handler lives in src/server/routes.py and nowhere else.",
        "Read https://docs.example.org/setup for the details.",
        "Set `retries` higher if the network is flaky.",
        "The parseHeader helper is the one to change.",
        "Bump it to version 42 when you release.",
    ]
    paras = []
    for i, fact in enumerate(facts):
        paras.append(" ".join([FILLER[i], FILLER[i + 1], fact, FILLER[i + 2], FILLER[i + 3]]))
    text = "\n\n".join(paras)
    out = _run(text)
    for fact in facts:
        assert fact in out
    assert count_tokens(out) < count_tokens(text)


def test_hot_identifiers_and_critical_facts_are_kept():
    middle = [
        "Nothing here mentions the widget frobnicator at all.",
        "ValueError: bad input was raised when the form was empty.",
    ]
    text = " ".join(FILLER[:4] + middle + FILLER[4:10])
    out = _run(text, _opts(hot=frozenset({"frobnicator"})))
    for sentence in middle:
        assert sentence in out


def test_fact_dense_text_drops_sentences_but_lists_their_facts():
    names = [f"module_{i}.handler_{i}" for i in range(40)]
    text = "\n\n".join(
        f"First we look at things. Then {n} changes because the caller of {n} expects more. "
        "Last we are done."
        for n in names
    )
    out = _run(text)
    assert count_tokens(out) <= 0.85 * count_tokens(text)  # the frame sentences alone are ~40%
    assert "[mentions:" in out
    for n in names:
        assert n in out


def test_markdown_structure_survives():
    items = "\n".join(f"- {FILLER[i]}" for i in range(10))
    code = "```python\nprint('kept verbatim')\n```"
    text = f"# Title\n\n{_essay(2, 6)}\n\n## Steps\n\n{items}\n\n{code}\n\n{_essay(1, 6)}"
    out = _run(text)
    assert out.startswith("# Title\n")
    assert "\n## Steps\n" in out
    assert code in out
    list_lines = [x for x in out.splitlines() if x.startswith("- ")]
    assert 0 < len(list_lines) < 10
    assert all(x[2:] in FILLER for x in list_lines)
    assert re.search(r"^…$", out, re.M), "a run of dropped list items shows as one gap line"


def test_separate_lines_keep_their_breaks_and_indentation():
    lines = [f"    step {w}: {FILLER[i % 10]}" for i, w in enumerate("abcdefghijklmnop")]
    text = "Output:\n" + "\n".join(lines)
    out = _run(text)
    for line in out.splitlines()[1:-1]:
        assert line in lines or line.strip().startswith("…")


# --- hostile input ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   \n\n",
        "word " * 200_000,
        "a" * 1_000_000,
        "This is a plain sentence about nothing much. " * 20_000,
        "\x00\x01\x02 junk \xff" * 2000,
        "\ufffd\ufffd bad bytes. " * 500,
        "\x1b[31mRed text here.\x1b[0m " * 300,
        "```\n" + "unterminated fence\n" * 500,
        "| a | b |\n|---|---|\n" + "| 1 | 2 |\n" * 500,
    ],
    ids=[
        "empty",
        "blank",
        "1mb-words",
        "1mb-word",
        "1mb-sentences",
        "binary",
        "fffd",
        "ansi",
        "open-fence",
        "table",
    ],
)
def test_hostile_input_never_crashes_or_grows(text):
    _run(text)


_words = st.sampled_from(
    "the a garden plant water soil foo.py load_config() v1.2.3 https://x.org/a e.g. 3.14 "
    "`code` camelCase Dotted.name - * # | > 1. ``` \n \n\n . ! ? , : ;".split(" ")
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(words=st.lists(_words, min_size=0, max_size=400))
def test_any_word_soup_never_grows_is_stable_and_verbatim(words):
    text = " ".join(words)
    out = _run(text)
    if out != text:
        for piece in _kept_pieces(out):
            assert piece in text or all(p in text for p in piece.split(" ")), piece


@settings(max_examples=100, deadline=None)
@given(text=st.text(max_size=4000))
def test_any_text_never_grows_and_is_stable(text):
    _run(text)


# --- real prose ------------------------------------------------------------------------------

_TOOLISH = ("Traceback", 'File "', "│", "⋮", "Debug:", "Aider v0.", "<<<<<<<", "```")


def _assistant_prose(path: Path) -> list[str]:
    """Assistant replies without code or edits from an ``.aider.chat.history.md``: runs of lines
    after a user (``#### ``) line that are not tool output (``> ``, whose continuation lines carry
    no marker, so a run ends at the next blank line)."""
    replies, cur, kind = [], [], None
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.startswith("#### "):
            k = "user"
        elif line.startswith(("> ", "# aider chat started")):
            k = "tool"
        elif kind == "tool" and line.strip():
            k = "tool"
        elif kind in ("user", "tool") and not line.strip():
            k = "gap"
        else:
            k = "assistant"
        if k != kind and cur:
            if kind == "assistant":
                replies.append("\n".join(cur).strip())
            cur = []
        kind = k
        cur.append(line)
    if kind == "assistant" and cur:
        replies.append("\n".join(cur).strip())
    return [r for r in replies if len(r) > 400 and not any(t in r for t in _TOOLISH)]


def test_real_assistant_replies(histories_dir):
    tokens_in = tokens_out = 0
    replies = [r for p in sorted(histories_dir.glob("*.md")) for r in _assistant_prose(p)]
    assert len(replies) > 100
    for reply in replies:
        out = _run(reply)
        assert not missing_facts(reply, out)
        pieces = _kept_pieces(out)
        assert all(piece in reply for piece in pieces if "\n" not in piece)
        tokens_in += count_tokens(reply)
        tokens_out += count_tokens(out)
    # Coding chat is dense in names and paths that must all survive; measured ~0.74.
    assert tokens_out / tokens_in < 0.8


def test_real_documentation_keeps_every_fact():
    docs = sorted(AIDER_DOCS.rglob("*.md")) if AIDER_DOCS.is_dir() else []
    if not docs:
        pytest.skip("aider's documentation is not installed")
    from aider_gardener.compress.prose import _facts

    shrunk = 0
    for doc in docs:
        text = doc.read_text(encoding="utf-8")
        out = _run(text)
        shrunk += out != text
        flat = " ".join(out.split())
        unnumbered = re.sub(r"^(\s*)(?:[-*+]|\d{1,3}[.)])\s+", r"\1", text, flags=re.M)
        lost = [f for f in _facts(unnumbered) if " ".join(f.split()) not in flat]
        assert not lost, (doc.name, lost[:5])
    assert shrunk >= len(docs) // 2


def test_benchmark_real_documentation(benchmark):
    docs = sorted(AIDER_DOCS.rglob("*.md")) if AIDER_DOCS.is_dir() else []
    if not docs:
        pytest.skip("aider's documentation is not installed")
    text = "\n\n".join(d.read_text(encoding="utf-8") for d in docs)
    out = benchmark(compress_prose, text, _opts())
    assert len(out.text) < len(text)


def test_benchmark_typical_reply(benchmark):
    text = _essay(6, 6)
    out = benchmark(compress_prose, text, _opts())
    assert len(out.text) < len(text)

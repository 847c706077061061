"""The priority formula and the reference keys it is fed by."""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aider_gardener.store import priority
from aider_gardener.store.priority import (
    BASE,
    DAY,
    RECENCY_HALF_LIFE,
    RECENCY_MAX,
    REFERENCE_MAX,
    STALENESS_MAX,
    camel_terms,
    extract_keys,
    handle_ids,
    paths_match,
    score,
)

T0 = 1_700_000_000.0


def at(cls: str, age: float, **kw) -> float:
    return score(cls, created=T0, last_access=T0, now=T0 + age, **kw)


def test_fresh_entries_rank_by_class_base():
    fresh = {cls: at(cls, 0) for cls in BASE}
    assert sorted(fresh, key=fresh.get, reverse=True)[:3] == ["prompt", "error", "code"]
    assert fresh["log"] < fresh["structured"] == fresh["edit"] < fresh["prose"]
    assert fresh["prompt"] == BASE["prompt"] + RECENCY_MAX


def test_recency_bonus_halves_every_half_life():
    bonus_now = at("code", 0) - BASE["code"]
    bonus_later = at("code", RECENCY_HALF_LIFE) - BASE["code"]
    staleness = 5.0 * RECENCY_HALF_LIFE / DAY
    assert bonus_later + staleness == pytest.approx(bonus_now / 2)


def test_access_resets_the_clock():
    old = score("log", created=T0, last_access=T0, now=T0 + DAY)
    touched = score("log", created=T0, last_access=T0 + DAY, now=T0 + DAY)
    assert touched > old
    assert touched == at("log", 0)


def test_staleness_is_capped_and_score_never_negative():
    week = at("log", 7 * DAY)
    year = at("log", 365 * DAY)
    assert year == max(0.0, BASE["log"] - STALENESS_MAX)
    assert week >= year >= 0.0
    # a week-old prompt still outranks a fresh log
    assert at("prompt", 7 * DAY) > at("log", 0)


def test_pinned_never_decays():
    fresh = at("log", 0, pinned=True)
    assert at("log", 30 * DAY, pinned=True) == fresh
    assert fresh > at("log", 30 * DAY)


def test_references_add_a_fading_capped_bonus():
    plain = at("structured", 3600)
    once = at("structured", 3600, refs=1, last_ref=T0 + 3600)
    many = at("structured", 3600, refs=50, last_ref=T0 + 3600)
    assert once > plain
    assert many - plain == pytest.approx(REFERENCE_MAX)
    faded = at("structured", 3600 + 5 * 3600, refs=1, last_ref=T0 + 3600)
    assert faded - at("structured", 6 * 3600) < once - plain


def test_resolved_error_decays_faster_from_resolution():
    resolved_at = T0 + 600
    for age in (1800, 7200, 2 * DAY):
        plain = at("error", age)
        resolved = at("error", age, resolved_at=resolved_at)
        assert resolved < plain
    # before it was resolved nothing changes
    assert at("error", 300, resolved_at=resolved_at) == at("error", 300)
    # from resolution on its clock runs RESOLVED_DECAY times faster
    fast = priority.RESOLVED_DECAY
    assert at("error", 600 + 7200, resolved_at=resolved_at) == pytest.approx(
        at("error", 600 + fast * 7200)
    )


@settings(max_examples=200, deadline=None)
@given(
    cls=st.sampled_from(sorted(BASE) + ["unknown"]),
    a=st.floats(0, 400 * DAY),
    b=st.floats(0, 400 * DAY),
    refs=st.integers(0, 20),
    resolved=st.booleans(),
)
def test_score_never_grows_with_time(cls, a, b, refs, resolved):
    kw = dict(refs=refs, last_ref=T0 if refs else None, resolved_at=T0 if resolved else None)
    early, late = sorted((a, b))
    assert at(cls, late, **kw) <= at(cls, early, **kw) + 1e-9
    assert at(cls, late, **kw) >= 0.0


def test_sql_function_matches_python():
    conn = sqlite3.connect(":memory:")
    priority.register(conn)
    got = conn.execute(
        f"SELECT {priority.SQL_FUNCTION}('error', ?, ?, ?, 0, 2, ?, NULL)",
        (T0, T0, T0 + 5000, T0 + 100),
    ).fetchone()[0]
    assert got == score(
        "error", created=T0, last_access=T0, now=T0 + 5000, refs=2, last_ref=T0 + 100
    )


def test_default_ttl_keeps_prompts_and_drops_logs_first():
    ttl = priority.DEFAULT_TTL
    assert ttl["prompt"] is None
    assert set(ttl) == set(BASE)
    finite = {k: v for k, v in ttl.items() if v is not None}
    assert min(finite, key=finite.get) == "log"


def test_extract_keys_finds_paths_identifiers_codes_and_handles():
    text = (
        'File "/home/me/proj/src/app/models.py", line 12, in load_config\n'
        "error[E0432]: unresolved import `crate::ContextPressure`\n"
        "src/index.ts(4,7): error TS2339: Property 'x' does not exist\n"
        "see https://example.com/docs/page.html for details\n"
        "[full output stored: id=abcdefgh23]\n"
        "the quick brown fox\n"
    )
    keys = extract_keys(text)
    for want in (
        "/home/me/proj/src/app/models.py",
        "models.py",
        "load_config",
        "e0432",
        "ts2339",
        "contextpressure",
        "src/index.ts",
        "index.ts",
        "abcdefgh23",
    ):
        assert want in keys, want
    assert "quick" not in keys and "brown" not in keys
    assert not any("example.com" in k for k in keys)


def test_extract_keys_is_bounded():
    text = " ".join(f"name_{i}" for i in range(5000))
    assert len(extract_keys(text)) == priority.MAX_KEYS


def test_handle_ids():
    text = "x [full output stored: id=aaaaaaaaaa]\ny id=bbbbbbbbbb id=aaaaaaaaaa"
    assert handle_ids(text) == ["aaaaaaaaaa", "bbbbbbbbbb"]


def test_camel_terms_splits_joined_words():
    terms = camel_terms("class ContextPressure: parseHTTPResponse snake_case plain").split("\n")
    assert "context pressure" in terms
    assert "parse http response" in terms
    assert not any("snake" in t for t in terms)


@pytest.mark.parametrize(
    "a,b,same",
    [
        ("src/app.py", "/home/me/proj/src/app.py", True),
        ("./src/app.py", "src/app.py", True),
        ("a/src/app.py", "src/app.py", True),
        ("app.py", "src/app.py", True),
        ("src\\app.py", "SRC/app.py", True),
        ("src/app.py", "src/myapp.py", False),
        ("lib/app.py", "src/app.py", False),
        ("", "app.py", False),
    ],
)
def test_paths_match(a, b, same):
    assert paths_match(a, b) is same
    assert paths_match(b, a) is same

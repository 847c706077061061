"""Checkpoints: rendering, round trip, atomic writes, corrupt files, pruning."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import aider_gardener  # noqa: F401  (offline before tiktoken)
from aider_gardener.continuity import checkpoint as ck
from aider_gardener.continuity.checkpoint import (
    SECTIONS,
    CheckpointError,
    list_checkpoints,
    load_latest,
    parse_checkpoint,
    render_checkpoint,
    validate,
    write_checkpoint,
)
from aider_gardener.continuity.facts import KINDS, FactBook

ROOT = Path(__file__).resolve().parents[2]
WHEN = datetime(2025, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
META = {"trigger": "manual", "session": "s-1", "project": "/work/demo", "created": WHEN}


def _book() -> FactBook:
    book = FactBook()
    book.add("goal", "goal", "Add a /version command", 1)
    book.add("goal", "goal", "Add retry with backoff to src/client.py", 3)
    book.add("constraint", "api", "never change the public API of client.py", 1)
    book.add("decision", "lib", "use tenacity instead of a hand-written loop", 2)
    book.add("file", "README.md", "read-only README.md", 1, detail={"op": "read-only"})
    book.add(
        "file",
        "src/client.py",
        "edit 1",
        2,
        detail={"op": "edited", "commit": "a1b2c3d", "message": "add retry"},
    )
    book.add(
        "file",
        "src/client.py",
        "edit 2",
        4,
        detail={"op": "edited", "commit": "b2c3d4e", "message": 'use "tenacity" (v8)'},
    )
    book.add("file", "tests/test_client.py", "new", 4, detail={"op": "created"})
    book.add("command", "pytest -q", "`pytest -q` → 2 failed", 4, entry_id="e1a2")
    book.add(
        "error",
        "test_retry",
        "tests/test_client.py::test_retry FAILED - AssertionError: 3 != 2",
        4,
        entry_id="e1a2",
        detail={"command": "pytest -q"},
    )
    fixed = book.add("error", "E0432", "error[E0432]: unresolved import `foo`", 2)
    book.update(fixed, status="resolved")
    book.add("failed", "send", "patching requests.Session.send: same failure", 3)
    return book


def _section(text: str, title: str) -> list[str]:
    lines = text.splitlines()
    start = lines.index(f"## {title}") + 1
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("## ")), len(lines))
    return [line for line in lines[start:end] if line]


def test_render_has_front_matter_and_all_sections():
    text = render_checkpoint(_book(), note="before the refactor", **META)
    assert validate(text) == []
    front = yaml.safe_load(text.split("---\n")[1])
    assert front == {
        "created": "2025-01-02T03:04:05Z",
        "trigger": "manual",
        "session": "s-1",
        "project": "/work/demo",
        "verified": False,
        "note": "before the refactor",
    }
    headings = [line[3:] for line in text.splitlines() if line.startswith("## ")]
    assert headings == list(SECTIONS)


def test_sections_are_filled_from_the_facts():
    text = render_checkpoint(_book(), **META)
    assert _section(text, "What changed") == [
        '- src/client.py: edited (a1b2c3d "add retry")',
        '- src/client.py: edited (b2c3d4e "use "tenacity" (v8)")',
        "- tests/test_client.py: created",
        "### Commands run",
        "- `pytest -q` → 2 failed (/recall e1a2)",
        "### Fixed errors",
        "- error[E0432]: unresolved import `foo`",
    ]
    assert _section(text, "Why") == [
        "- Add retry with backoff to src/client.py",
        "### Earlier requests",
        "- Add a /version command",
    ]
    error = "tests/test_client.py::test_retry FAILED - AssertionError: 3 != 2"
    assert _section(text, "Active issues") == [
        f"- {error} (from `pytest -q`; /recall e1a2)",
        "### Failed approaches (do not repeat)",
        "- patching requests.Session.send: same failure",
    ]
    assert text.count("E0432") == 1  # resolved: only under Fixed errors, not an active issue
    assert _section(text, "Key decisions") == [
        "- use tenacity instead of a hand-written loop",
        "### Constraints",
        "- never change the public API of client.py",
    ]
    assert _section(text, "Next steps") == [
        f"- Resolve: {error} (from `pytest -q`; /recall e1a2)",
        "- Continue: Add retry with backoff to src/client.py",
    ]
    assert _section(text, "Files") == [
        "- README.md: read-only",
        '- src/client.py: edited (b2c3d4e "use "tenacity" (v8)")',
        "- tests/test_client.py: created",
    ]


def test_empty_book_says_none():
    text = render_checkpoint(FactBook(), **META)
    assert validate(text) == []
    for title in SECTIONS:
        expected = ["- none recorded"] if title == "Next steps" else ["- none"]
        assert _section(text, title) == expected
    assert len(parse_checkpoint(text).facts) == 0


def test_bad_trigger_is_refused():
    with pytest.raises(ValueError):
        render_checkpoint(FactBook(), trigger="whenever", session="s", project="p")


def test_round_trip_is_stable_and_rebuilds_facts():
    text = render_checkpoint(_book(), note="n", **META)
    parsed = parse_checkpoint(text)
    assert render_checkpoint(parsed.facts, note="n", **META) == text
    assert (parsed.created, parsed.trigger, parsed.session, parsed.project) == (
        "2025-01-02T03:04:05Z",
        "manual",
        "s-1",
        "/work/demo",
    )
    assert parsed.verified is False and parsed.note == "n"
    facts = parsed.facts
    goal = [f for f in facts.find("goal")]
    assert [g.text for g in goal] == ["Add retry with backoff to src/client.py"]
    assert [g.text for g in facts.find("goal", live=False) if not g.live] == [
        "Add a /version command"
    ]
    client = facts.find("file", "src/client.py")
    assert len(client) == 1
    assert client[0].detail == {
        "op": "edited",
        "commit": "b2c3d4e",
        "message": 'use "tenacity" (v8)',
    }
    history = [f for f in facts.find("file", "src/client.py", live=False) if not f.live]
    assert [f.detail["commit"] for f in history] == ["a1b2c3d"]
    assert facts.find("file", "README.md")[0].detail == {"op": "read-only"}
    fixed, error = facts.find("error")
    assert fixed.status == "resolved" and fixed.text == "error[E0432]: unresolved import `foo`"
    assert error.text == "tests/test_client.py::test_retry FAILED - AssertionError: 3 != 2"
    assert error.detail == {"command": "pytest -q"} and error.entry_id == "e1a2"
    (command,) = facts.find("command")
    assert (command.key, command.entry_id) == ("pytest -q", "e1a2")
    assert [f.text for f in facts.find("failed")] == [
        "patching requests.Session.send: same failure"
    ]
    assert [f.text for f in facts.find("decision")] == [
        "use tenacity instead of a hand-written loop"
    ]
    assert [f.text for f in facts.find("constraint")] == [
        "never change the public API of client.py"
    ]
    assert all(f.session == "s-1" for f in facts)


def test_user_edits_count():
    text = render_checkpoint(_book(), **META)
    text = text.replace(
        "- use tenacity instead of a hand-written loop",
        "- use urllib3 Retry instead of tenacity\n- keep timeouts at 10 s",
    )
    text = text.replace("- README.md: read-only\n", "")
    text = text.replace(
        "- Continue: Add retry with backoff to src/client.py",
        "- Continue: Add retry with backoff to src/client.py\n- Then document the retry policy",
    )
    facts = parse_checkpoint(text).facts
    assert [f.text for f in facts.find("decision")] == [
        "use urllib3 Retry instead of tenacity",
        "keep timeouts at 10 s",
    ]
    assert facts.find("file", "README.md") == []
    goals = facts.find("goal")
    assert goals[-1].text == "Then document the retry policy"
    again = render_checkpoint(facts, **META)
    assert "- Continue: Then document the retry policy" in again
    assert "- Add retry with backoff to src/client.py" in _section(again, "Why")


_TEXT = st.text(st.characters(codec="utf-8"), max_size=40)
_WORDS = st.text(st.sampled_from(list("ab :()`\"'-/#*\n")), max_size=20)


@st.composite
def books(draw) -> FactBook:
    book = FactBook()
    text = st.one_of(_TEXT, _WORDS)
    for turn in range(draw(st.integers(0, 25))):
        kind = draw(st.sampled_from(sorted(KINDS)))
        detail = draw(
            st.fixed_dictionaries(
                {},
                optional={
                    "op": st.one_of(st.sampled_from(["edited", "created", "added"]), text),
                    "commit": text,
                    "message": text,
                    "command": text,
                },
            )
        )
        fact = book.add(
            kind,
            draw(st.one_of(st.sampled_from(["a", "src/c.py"]), text)),
            draw(text),
            turn,
            entry_id=draw(st.one_of(st.none(), text)),
            detail=detail,
            supersede=draw(st.booleans()),
        )
        if draw(st.booleans()):
            book.update(fact, status=draw(st.sampled_from(["open", "resolved"])))
    return book


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(books(), st.one_of(st.none(), _TEXT), _TEXT, _TEXT)
def test_any_book_round_trips(book, note, session, project):
    meta = dict(META, session=session, project=project, note=note)
    text = render_checkpoint(book, **meta)
    assert validate(text) == []
    parsed = parse_checkpoint(text)
    again = render_checkpoint(parsed.facts, **meta)
    assert again == text
    assert render_checkpoint(parse_checkpoint(again).facts, **meta) == text


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(), st.text(st.sampled_from(list("-#:\n ab`()")))))
def test_arbitrary_text_never_crashes_the_parser(text):
    problems = validate(text)
    assert isinstance(problems, list)
    try:
        parse_checkpoint(text)
    except CheckpointError as exc:
        assert problems and str(exc)
    else:
        assert problems == []


# --------------------------------------------------------------------------- writing


def _write(folder: Path, note: str = "n", **kw) -> Path:
    return write_checkpoint(folder, render_checkpoint(_book(), note=note, **META), **kw)


def test_write_is_verified_private_and_readable(tmp_path):
    folder = tmp_path / ".aider.gardener" / "checkpoints"
    path = _write(folder)
    assert path.parent == folder and path.suffix == ".md"
    assert ck._NAME.match(path.name)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    loaded = load_latest(folder)
    assert loaded is not None and loaded.path == path
    assert loaded.verified is True
    assert render_checkpoint(loaded.facts, note="n", **META) == render_checkpoint(
        _book(), note="n", **META
    )
    assert [p.name for p in folder.iterdir()] == [path.name]  # no temp file left


def test_names_are_unique_and_listed_newest_first(tmp_path):
    paths = [_write(tmp_path, note=str(i)) for i in range(5)]
    assert len(set(paths)) == 5
    assert list_checkpoints(tmp_path) == paths[::-1]
    assert load_latest(tmp_path).note == "4"


def test_same_microsecond_gets_a_sequence_number(tmp_path, monkeypatch):
    class Frozen(datetime):
        @classmethod
        def now(cls, tz=None):
            return datetime(2025, 5, 6, 7, 8, 9, 123456, tzinfo=timezone.utc)

    monkeypatch.setattr(ck, "datetime", Frozen)
    paths = [_write(tmp_path, note=str(i), max_age_days=1e6) for i in range(3)]
    assert [p.name for p in paths] == [
        "20250506T070809.123456Z.md",
        "20250506T070809.123456Z-1.md",
        "20250506T070809.123456Z-2.md",
    ]
    assert list_checkpoints(tmp_path) == paths[::-1]
    assert load_latest(tmp_path).note == "2"


def test_invalid_text_is_refused_and_nothing_written(tmp_path):
    text = render_checkpoint(_book(), **META).replace("## Next steps", "## Later")
    with pytest.raises(CheckpointError, match="Next steps"):
        write_checkpoint(tmp_path, text)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("where", ["fsync", "replace", "hook"])
def test_failure_mid_write_keeps_old_and_leaves_no_temp(tmp_path, monkeypatch, where):
    first = _write(tmp_path, note="first")

    def boom(*args, **kwargs):
        raise OSError(28, "No space left on device")

    if where == "fsync":
        monkeypatch.setattr(ck.os, "fsync", boom)
    elif where == "replace":
        monkeypatch.setattr(ck.os, "replace", boom)
    else:
        monkeypatch.setattr(ck, "_before_replace", lambda tmp: (_ for _ in ()).throw(KeyError()))
    with pytest.raises((CheckpointError, KeyError)) as info:
        _write(tmp_path, note="second")
    if where != "hook":
        assert info.type is CheckpointError and "No space left" in str(info.value)
    assert [p.name for p in tmp_path.iterdir()] == [first.name]
    assert load_latest(tmp_path).note == "first"


def test_read_back_mismatch_is_not_saved(tmp_path, monkeypatch):
    real = Path.read_bytes

    def short_read(self):
        data = real(self)
        return data[: len(data) // 2] if self.name.endswith(ck._TEMP_SUFFIX) else data

    monkeypatch.setattr(Path, "read_bytes", short_read)
    with pytest.raises(CheckpointError, match="read-back"):
        _write(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_unwritable_folder_is_a_checkpoint_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(CheckpointError, match="cannot write"):
        _write(blocker / "checkpoints")
    with pytest.raises(CheckpointError):
        _write(blocker)


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root ignores permissions"
)
def test_read_only_folder_is_a_checkpoint_error(tmp_path):
    first = _write(tmp_path, note="first")
    tmp_path.chmod(0o500)
    try:
        with pytest.raises(CheckpointError, match="cannot write"):
            _write(tmp_path, note="second")
    finally:
        tmp_path.chmod(0o700)
    assert list_checkpoints(tmp_path) == [first]


def test_read_only_folder_via_mkstemp(tmp_path, monkeypatch):
    """Runs as root too: the permission error raised where the OS would raise it."""

    def denied(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(ck.tempfile, "mkstemp", denied)
    with pytest.raises(CheckpointError, match="Permission denied"):
        _write(tmp_path)


_KILLED_WRITER = textwrap.dedent("""
    import sys, time
    from datetime import datetime, timezone
    from pathlib import Path
    import aider_gardener
    from aider_gardener.continuity import checkpoint as ck
    from aider_gardener.continuity.facts import FactBook

    folder, marker = Path(sys.argv[1]), Path(sys.argv[2])

    def pause(tmp):
        part = marker.with_name(marker.name + ".part")  # whole when it appears: the test
        part.write_text(str(tmp))  # kills this process as soon as it sees the marker
        part.replace(marker)
        time.sleep(600)

    ck._before_replace = pause
    book = FactBook()
    book.add("goal", "goal", "the second checkpoint, never finished", 1)
    text = ck.render_checkpoint(book, trigger="pressure", session="s", project="p", note="killed")
    ck.write_checkpoint(folder, text)
    """)


def test_sigkill_mid_write_leaves_the_previous_checkpoint(tmp_path):
    folder = tmp_path / "checkpoints"
    first = _write(folder, note="first")
    marker = tmp_path / "marker"
    proc = subprocess.Popen(
        [sys.executable, "-c", _KILLED_WRITER, str(folder), str(marker)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        deadline = time.monotonic() + 120
        while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.exists(), "the writer never reached the rename"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    temp = Path(marker.read_text())
    assert temp.exists() and temp.parent == folder  # the kill left its (complete) temp file
    warnings: list[str] = []
    loaded = load_latest(folder, warn=warnings.append)
    assert loaded is not None and loaded.path == first and loaded.note == "first"
    assert warnings == []
    assert list_checkpoints(folder) == [first]
    # the abandoned temp file is cleaned up by a later write once it is stale
    old = time.time() - ck.STALE_TEMP_SECONDS - 60
    os.utime(temp, (old, old))
    third = _write(folder, note="third")
    assert not temp.exists()
    assert list_checkpoints(folder) == [third, first]


# --------------------------------------------------------------------------- corrupt files


def _corruptions(valid: str) -> dict[str, bytes]:
    return {
        "truncated": valid.encode()[: len(valid) // 2],
        "binary": bytes(range(256)) * 4,
        "bad YAML": valid.replace("trigger: manual", "trigger: [manual").encode(),
        "missing section": valid.replace("## Files", "## Documents").encode(),
        "not UTF-8": valid.encode().replace(b"Add retry", b"Add \xff\xfe retry"),
        "empty": b"",
    }


@pytest.mark.parametrize("kind", list(_corruptions("x")))
def test_corrupt_newest_is_reported_once_and_skipped(tmp_path, kind):
    good = _write(tmp_path, note="good")
    valid = good.read_text()
    bad = tmp_path / "29990101T000000.000000Z.md"  # sorts newest
    bad.write_bytes(_corruptions(valid)[kind])
    assert list_checkpoints(tmp_path)[0] == bad
    warnings: list[str] = []
    loaded = load_latest(tmp_path, warn=warnings.append)
    assert loaded is not None and loaded.path == good
    assert len(warnings) == 1
    assert bad.name in warnings[0] and "\n" not in warnings[0]


def test_all_corrupt_gives_none_and_one_warning_each(tmp_path):
    for i in range(3):
        (tmp_path / f"2025010{i + 1}T000000.000000Z.md").write_text(f"junk {i}")
    (tmp_path / ".checkpoint-abc.tmp").write_text("a temp file is never read")
    warnings: list[str] = []
    assert load_latest(tmp_path, warn=warnings.append) is None
    assert len(warnings) == 1  # one line for all that was skipped
    assert warnings[0].startswith("gardener: skipped 3 checkpoints: ")
    assert warnings[0].count("(corrupt: ") == 3 and ".tmp" not in warnings[0]


def test_missing_folder_gives_none(tmp_path):
    assert list_checkpoints(tmp_path / "nope") == []
    assert load_latest(tmp_path / "nope") is None


def test_project_filter(tmp_path):
    mine = _write(tmp_path, note="mine")
    other_text = render_checkpoint(_book(), **dict(META, project="/elsewhere"))
    write_checkpoint(tmp_path, other_text)
    assert load_latest(tmp_path, project="/work/demo").path == mine
    assert load_latest(tmp_path, project="/elsewhere").project == "/elsewhere"
    assert load_latest(tmp_path, project="/nobody") is None


def test_validate_reports_front_matter_problems():
    text = render_checkpoint(_book(), **META)
    assert validate(text.replace("trigger: manual", "trigger: whim")) == ["unknown trigger 'whim'"]
    assert validate(text.replace("verified: false\n", "")) == ["front matter lacks 'verified'"]
    assert "created" in validate(text.replace("2025-01-02T03:04:05Z", "yesterday"))[0]
    assert validate(text.replace("---\n", "", 1))
    doubled = text + "\n## Files\n- x\n"
    assert validate(doubled) == ["section '## Files' appears 2 times"]


def test_hand_edited_unquoted_created_still_loads():
    text = render_checkpoint(_book(), **META).replace(
        "created: '2025-01-02T03:04:05Z'", "created: 2025-01-02T03:04:05Z"
    )
    assert parse_checkpoint(text).created == "2025-01-02T03:04:05Z"


# --------------------------------------------------------------------------- pruning


def _named(folder: Path, when: datetime, seq: int = 0) -> Path:
    name = when.strftime("%Y%m%dT%H%M%S.%fZ") + (f"-{seq}" if seq else "") + ".md"
    path = folder / name
    path.write_text(render_checkpoint(_book(), note=name, **META))
    return path


def test_prune_by_count(tmp_path):
    now = datetime.now(timezone.utc)
    old = [_named(tmp_path, now - timedelta(hours=h)) for h in range(1, 8)]
    newest = _write(tmp_path, keep=3)
    assert list_checkpoints(tmp_path) == [newest, old[0], old[1]]


def test_prune_by_age_keeps_user_files_and_fresh_temps(tmp_path):
    now = datetime.now(timezone.utc)
    recent = _named(tmp_path, now - timedelta(days=2))
    stale = [_named(tmp_path, now - timedelta(days=d)) for d in (40, 400)]
    user = tmp_path / "before-big-refactor.md"
    user.write_text(render_checkpoint(_book(), **META))
    old_time = time.time() - 400 * 86400
    os.utime(user, (old_time, old_time))
    fresh_temp = tmp_path / ".checkpoint-live.tmp"
    fresh_temp.write_text("another writer is busy")
    newest = _write(tmp_path, max_age_days=30)
    assert not any(p.exists() for p in stale)
    assert recent.exists() and user.exists() and fresh_temp.exists()
    assert list_checkpoints(tmp_path) == [newest, recent, user]


def test_keep_zero_still_keeps_the_new_one(tmp_path):
    newest = _write(tmp_path, keep=0, max_age_days=0)
    assert list_checkpoints(tmp_path) == [newest]


# -- across sessions: what is carried, how a checkpoint is named -----------------------------------


def test_carried_facts_are_the_open_ones_renumbered():
    book = FactBook()
    book.add("goal", "goal", "make parse strict", 1)
    book.add("file", "app.py", "app.py: added", 1, detail={"op": "added"})
    book.add("decision", "use:httpx|requests", "use httpx instead of requests", 2)
    book.add("decision", "use:aiohttp|httpx", "use aiohttp instead of httpx", 3, supersede=False)
    book.find("decision")[0].status = "superseded"
    book.add("constraint", "rule:never", "never change the public API", 3)
    book.add("error", "e1", "FAILED t::a", 4, detail={"command": "pytest"})
    book.add("error", "e2", "FAILED t::b", 4, status="resolved")
    book.add("failed", "attempt:1", "edit of app.py (uncommitted, turn 4): did not fix", 5)
    carried = ck.carried_facts(book)
    assert [(f.id, f.kind, f.text, f.turn) for f in carried] == [
        (1, "decision", "use aiohttp instead of httpx", 0),
        (2, "constraint", "never change the public API", 0),
        (3, "error", "FAILED t::a", 0),
        (4, "failed", "edit of app.py (uncommitted, turn 4): did not fix", 0),
    ]
    assert carried.find("error")[0].detail["command"] == "pytest"
    assert ck.describe_counts(carried) == (
        "1 decision, 1 constraint, 1 open error, 1 failed approach"
    )
    assert ck.describe_counts(FactBook()) == "no facts"
    for n in range(ck.MAX_CARRIED + 5):
        book.add("constraint", f"rule:{n}", f"never do thing {n}", 6 + n)
    kept = [f.text for f in ck.carried_facts(book).find("constraint")]
    assert len(kept) == ck.MAX_CARRIED and kept[-1] == f"never do thing {ck.MAX_CARRIED + 4}"


def test_decisions_read_back_keep_the_trackers_keys():
    """So "use Z instead of X" in the next session supersedes a decision read from a file."""
    book = FactBook()
    book.add("decision", "use:orjson|json", "use orjson instead of json for the cache", 1)
    book.add("constraint", "rule:x", "never change the public API of parse", 1)
    book.add("decision", "hand", "the cache lives in ~/.cache/app", 1)  # not a recognised choice
    text = render_checkpoint(book, **META)
    back = parse_checkpoint(text).facts
    keys = {f.text: f.key for f in back}
    assert keys["use orjson instead of json for the cache"] == "use:orjson|json"
    assert keys["never change the public API of parse"].startswith("rule:never change")
    assert keys["the cache lives in ~/.cache/app"] == "the cache lives in ~/.cache/app"
    assert render_checkpoint(back, **META) == text


def test_find_checkpoint_by_name_prefix_or_path(tmp_path, monkeypatch):
    folder = tmp_path / "checkpoints"
    text = render_checkpoint(_book(), **META)
    first = write_checkpoint(folder, text)
    time.sleep(0.002)
    second = write_checkpoint(folder, text)

    def found(name, **kw):
        return ck.find_checkpoint(folder, name, **kw).path

    assert found(first.name) == first
    assert found(first.stem) == first  # without .md
    assert found(f" '{second.stem}' ") == second
    assert found(str(second)) == second  # a path
    mine = tmp_path / "project" / "saved.md"
    mine.parent.mkdir()
    mine.write_text(text)
    assert found("saved.md", base=mine.parent) == mine
    monkeypatch.chdir(mine.parent)
    assert found("saved.md") == Path("saved.md")
    common = os.path.commonprefix([first.name, second.name])
    with pytest.raises(CheckpointError, match="matches 2 checkpoints"):
        ck.find_checkpoint(folder, common)
    assert found(second.name[: len(common) + 1]) == second
    for bad in ("nope", ""):
        with pytest.raises(CheckpointError):
            ck.find_checkpoint(folder, bad)


def test_find_checkpoint_says_the_same_of_any_path_that_is_no_checkpoint(tmp_path):
    """/resume PATH is no way to learn whether a file exists or what it holds."""
    folder = tmp_path / "checkpoints"
    write_checkpoint(folder, render_checkpoint(_book(), **META))
    (tmp_path / "secret.txt").write_text("---\nkey: value\n---\nnot a checkpoint\n")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "adir").mkdir()
    answers = []
    for name in ("secret.txt", "missing.txt", "fifo", "adir"):
        with pytest.raises(CheckpointError) as err:
            ck.find_checkpoint(folder, str(tmp_path / name))
        answers.append(str(err.value).replace(str(tmp_path / name), "PATH"))
    assert len(set(answers)) == 1 and "not a checkpoint name or checkpoint file" in answers[0]


def test_read_checkpoint_never_blocks_on_a_fifo(tmp_path):
    fifo = tmp_path / "20250101T000000.000000Z.md"
    os.mkfifo(fifo)  # nobody writes it: a blocking open or read would hang here
    with pytest.raises(CheckpointError, match="not a regular file"):
        ck.read_checkpoint(fifo)


def test_future_dated_and_other_projects_checkpoints_are_skipped_in_one_line(tmp_path):
    mine = _write(tmp_path, note="mine")
    future = render_checkpoint(
        _book(), **dict(META, created=datetime(2030, 1, 1, tzinfo=timezone.utc))
    )
    planted = tmp_path / "29990101T000000.000000Z.md"
    planted.write_text(future)
    named_later = tmp_path / "29980101T000000.000000Z.md"
    named_later.write_text(render_checkpoint(_book(), **dict(META, note="renamed")))
    other = tmp_path / "29970101T000000.000000Z.md"
    other.write_text(render_checkpoint(_book(), **dict(META, project="/elsewhere")))
    warnings: list[str] = []
    loaded = load_latest(tmp_path, warn=warnings.append, project="/work/demo")
    assert loaded is not None and loaded.path == mine
    assert len(warnings) == 1
    assert "skipped 3 checkpoints" in warnings[0]
    assert f"{planted.name} (dated in the future: 2030-01-01T00:00:00Z)" in warnings[0]
    assert f"{named_later.name} (named for a future time)" in warnings[0]
    assert f"{other.name} (of another project: /elsewhere)" in warnings[0]


def test_same_project_follows_symlinks(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    assert ck.same_project(str(tmp_path / "link"), f"{real}/")
    assert not ck.same_project(str(real), str(tmp_path))
    assert not ck.same_project("", str(real))


def test_checkpoint_text_holds_no_secret():
    key = "sk-proj-" + "Ab3dEf6hIj9lMn2pQr5tUv8xYz" * 3
    book = FactBook()
    book.add(
        "command", f"OPENAI_API_KEY={key} pytest", f"`OPENAI_API_KEY={key} pytest`: 1 failed", 1
    )
    book.add("error", "auth", f"AuthenticationError: Incorrect API key provided: {key}", 1)
    text = render_checkpoint(book, **dict(META, note=f"before rotating {key}"))
    assert key not in text and "[redacted: " in text
    assert not validate(text)
    back = parse_checkpoint(text).facts
    assert render_checkpoint(back, **dict(META, note=f"before rotating {key}")) == text

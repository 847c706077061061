"""Checkpoints: the session's facts written to a Markdown file a person can read and edit.

A checkpoint is what a soft restart or the next session resumes from, so a wrong one is worse
than none. Hence: it is written to a temp file in the same folder, fsynced, read back and
validated, and only then renamed into place (``os.replace`` is atomic), so a crash or a kill at
any moment leaves either the old set of checkpoints or the old set plus a complete new one,
never a half-written file under a checkpoint name. ``verified: true`` in the front matter means
the file went through that read-back check.

The body is plain Markdown with one bullet per fact, and reading a checkpoint rebuilds the facts
from those bullets (the section, and a sub-heading within it, gives the kind), so whatever a user
edits before resuming is what the next session believes. Rendering the parsed facts again gives
the same text (a round trip is stable), which is what lets a resumed session checkpoint again
without drifting.
"""

from __future__ import annotations

import logging
import os
import re
import stat
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Sequence

import yaml

from ..lazy import lazy_module
from ..redact import redact
from .facts import Fact, FactBook
from .state import current_goal, error_line, file_line, one_line, order_key, recall_suffix

# read only when a checkpoint is parsed; not at Aider's start (its regexes cost ~50 ms)
extract = lazy_module("aider_gardener.continuity.extract")

SECTIONS = ("What changed", "Why", "Active issues", "Key decisions", "Next steps", "Files")
TRIGGERS = ("manual", "pressure", "eviction", "soft-restart", "exit")
FRONT_KEYS = ("created", "trigger", "session", "project", "verified", "note")
REQUIRED_KEYS = ("created", "trigger", "session", "project", "verified")

# Sub-headings (``### ``) that give the kind of the bullets under them.
SUB_COMMANDS = "Commands run"
SUB_EARLIER = "Earlier requests"
SUB_FAILED = "Failed approaches (do not repeat)"
SUB_CONSTRAINTS = "Constraints"
SUB_FIXED = "Fixed errors"
NONE = "none"
NONE_RECORDED = "none recorded"
FILE_OPS_CHANGED = ("edited", "created")

MAX_BYTES = 4 << 20  # a checkpoint is a few KB; anything this big is not one of ours
FUTURE_SLACK_SECONDS = 300.0  # clock adjustments; a checkpoint from later than this is not ours
STALE_TEMP_SECONDS = 3600.0
_TEMP_PREFIX = ".checkpoint-"
_TEMP_SUFFIX = ".tmp"
_NAME = re.compile(r"^(?P<stamp>\d{8}T\d{6}\.\d{6}Z)(?:-(?P<seq>\d+))?\.md$")
_STAMP = "%Y%m%dT%H%M%S.%fZ"
_CREATED = "%Y-%m-%dT%H:%M:%SZ"
# The inverses of state.file_line / error_line / recall_suffix. Parts are anchored on non-space
# characters so that however a line splits, rendering the parts again gives the same line.
_FILE_BULLET = re.compile(
    r"^(?P<path>\S(?:.*?\S)?): (?P<op>[\w-]+)"
    r'(?: \((?P<commit>[^\s()"`]+)(?: "(?P<message>\S(?:.*\S)?)")?\))?$'
)
_ERROR_SUFFIX = re.compile(
    r'^(?P<text>.*\S) \((?:from `(?P<command>[^`]*\S)`(?:; /recall (?P<id1>[^\s()"`]+))?'
    r'|/recall (?P<id2>[^\s()"`]+))\)$'
)
_FIXED_SUFFIX = re.compile(r"^(?P<text>.*\S) \(fixed by (?P<by>.*)\)$")
_RECALL_SUFFIX = re.compile(r'^(?P<text>.*\S) \(/recall (?P<id>[^\s()"`]+)\)$')
_BACKTICKED = re.compile(r"`([^`]+)`")

log = logging.getLogger(__name__)

# Test hook: called with the verified temp file just before it is renamed into place, so a test
# can kill the writer at the worst moment. Always None in normal use.
_before_replace: Callable[[Path], None] | None = None


class CheckpointError(Exception):
    """A checkpoint could not be written, or a file is not a valid checkpoint; the message says
    why, in one line fit for the user."""


@dataclass
class Checkpoint:
    path: Path | None
    created: str
    trigger: str
    session: str
    project: str
    verified: bool
    note: str | None
    body: str
    facts: FactBook


# --------------------------------------------------------------------------- rendering


def _bullets(lines: list[str]) -> list[str]:
    return [f"- {line}" for line in lines if line]


def _what_changed(book: FactBook) -> tuple[list[str], list[str]]:
    """Every edit and creation with its commit (superseded ones too: this is the story of the
    session, not its state), and the latest outcome of each command."""
    files = [
        file_line(f)
        for f in sorted(book.find("file", live=False), key=order_key)
        if f.detail.get("op") in FILE_OPS_CHANGED
    ]
    commands = [
        one_line(f.text) + recall_suffix(f)
        for f in sorted(book.find("command"), key=order_key)
        if one_line(f.text)
    ]
    return files, commands


def _fixed(book: FactBook) -> list[str]:
    """Errors seen and fixed, with what fixed them: the part of the artifact trail a resumed
    session is asked about and cannot see in the code."""
    out = []
    for f in sorted(book.find("error"), key=order_key):
        if f.status != "resolved" or not one_line(f.text):
            continue
        by = one_line(str(f.detail.get("resolved_by") or ""))
        out.append(one_line(f.text) + (f" (fixed by {by})" if by else ""))
    return out


def _why(book: FactBook) -> tuple[list[str], list[str]]:
    goal = current_goal(book)
    earlier = [
        one_line(f.text)
        for f in sorted(book.find("goal", live=False), key=order_key)
        if f is not goal and one_line(f.text)
    ]
    return ([one_line(goal.text)] if goal else []), earlier


def _open_errors(book: FactBook) -> list[Fact]:
    return [
        f
        for f in sorted(book.find("error"), key=order_key)
        if f.status == "open" and one_line(f.text)
    ]


def _next_steps(book: FactBook) -> list[str]:
    """Derived, never stored: resolve each open error (with the command to re-run), then carry
    on with the goal."""
    steps = [f"Resolve: {error_line(f)}" for f in _open_errors(book)]
    goal = current_goal(book)
    if goal is not None:
        steps.append(f"Continue: {one_line(goal.text)}")
    return steps


def _section(title: str, main: list[str], subs: Sequence[tuple[str, list[str]]] = ()) -> list[str]:
    """A ``## title`` with its bullets and ``### sub`` parts; "- none" when all are empty."""
    out = [f"## {title}", *_bullets(main)]
    parts = [(sub, _bullets(lines)) for sub, lines in subs]
    if len(out) == 1 and not any(bullets for _, bullets in parts):
        out.append(f"- {NONE}")
    for sub, bullets in parts:
        if bullets:
            out += [f"### {sub}", *bullets]
    out.append("")
    return out


def render_body(book: FactBook) -> str:
    files, commands = _what_changed(book)
    goal, earlier = _why(book)
    errors = [error_line(f) for f in _open_errors(book)]
    failed = [
        one_line(f.text) + recall_suffix(f)
        for f in sorted(book.find("failed"), key=order_key)
        if one_line(f.text)
    ]
    decisions = [one_line(f.text) for f in sorted(book.find("decision"), key=order_key)]
    constraints = [one_line(f.text) for f in sorted(book.find("constraint"), key=order_key)]
    live_files = sorted(book.find("file"), key=lambda f: (file_line(f), order_key(f)))
    steps = _next_steps(book) or [NONE_RECORDED]
    out = ["# Checkpoint", ""]
    out += _section(SECTIONS[0], files, [(SUB_COMMANDS, commands), (SUB_FIXED, _fixed(book))])
    out += _section(SECTIONS[1], goal, [(SUB_EARLIER, earlier)])
    out += _section(SECTIONS[2], errors, [(SUB_FAILED, failed)])
    out += _section(SECTIONS[3], decisions, [(SUB_CONSTRAINTS, constraints)])
    out += _section(SECTIONS[4], steps)
    out += _section(SECTIONS[5], [file_line(f) for f in live_files])
    return "\n".join(out)


def _format_created(created: datetime | None) -> str:
    when = created or datetime.now(timezone.utc)
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.astimezone(timezone.utc).strftime(_CREATED)


def _front_matter(meta: dict[str, Any]) -> str:
    data = {key: meta.get(key) for key in FRONT_KEYS}
    dumped = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=1 << 30)
    return f"---\n{dumped}---\n"


def render_checkpoint(
    book: FactBook,
    *,
    trigger: str,
    session: str,
    project: str,
    note: str | None = None,
    created: datetime | None = None,
) -> str:
    """The checkpoint text, ``verified: false``: only ``write_checkpoint`` sets it true, after
    the read-back check."""
    if trigger not in TRIGGERS:
        raise ValueError(f"trigger must be one of {TRIGGERS}, not {trigger!r}")
    meta = {
        "created": _format_created(created),
        "trigger": trigger,
        "session": one_line(str(session)),
        "project": one_line(str(project)),
        "verified": False,
        "note": redact(one_line(note)) or None,
    }
    return _front_matter(meta) + "\n" + render_body(book)


# --------------------------------------------------------------------------- parsing


def _split(text: str) -> tuple[dict[str, Any], str]:
    """Front matter and body; raises CheckpointError with the reason."""
    if not text.startswith("---\n"):
        raise CheckpointError("no YAML front matter (the file must start with '---')")
    end = text.find("\n---\n", 3)
    if end < 0:
        raise CheckpointError("front matter is not closed by a '---' line")
    try:
        meta = yaml.safe_load(text[4 : end + 1])
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        at = f" at line {where.line + 2}" if where is not None else ""
        raise CheckpointError(f"front matter is not valid YAML{at}") from exc
    if not isinstance(meta, dict):
        raise CheckpointError("front matter is not a YAML mapping")
    return meta, text[end + 5 :]


def _normal_created(value: Any) -> str | None:
    """``created`` as our ISO 8601 UTC text, whether YAML left it a string or (unquoted by a
    hand edit) made it a datetime."""
    if isinstance(value, datetime):
        return _format_created(value)
    if not isinstance(value, str):
        return None
    try:
        when = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return _format_created(when)


def _headings(body: str) -> list[str]:
    return [line[3:].strip() for line in body.splitlines() if line.startswith("## ")]


def validate(text: str) -> list[str]:
    """What is wrong with ``text`` as a checkpoint; [] when it is valid."""
    try:
        meta, body = _split(text)
    except CheckpointError as exc:
        return [str(exc)]
    problems = [f"front matter lacks {key!r}" for key in REQUIRED_KEYS if key not in meta]
    if "created" in meta and _normal_created(meta["created"]) is None:
        problems.append(f"created is not an ISO 8601 time: {meta['created']!r}")
    if "trigger" in meta and meta["trigger"] not in TRIGGERS:
        problems.append(f"unknown trigger {meta['trigger']!r}")
    if "verified" in meta and not isinstance(meta["verified"], bool):
        problems.append("verified is not true or false")
    for key in ("session", "project"):
        if key in meta and not isinstance(meta[key], (str, int, float)):
            problems.append(f"{key} is not a string")
    if meta.get("note") is not None and not isinstance(meta["note"], (str, int, float)):
        problems.append("note is not a string")
    headings = _headings(body)
    for title in SECTIONS:
        count = headings.count(title)
        if count == 0:
            problems.append(f"missing section '## {title}'")
        elif count > 1:
            problems.append(f"section '## {title}' appears {count} times")
    return problems


def _sections(body: str) -> dict[str, dict[str | None, list[str]]]:
    """section -> sub-heading (None for the part before any) -> bullet texts. A section whose
    only bullet is "none" is empty."""
    out: dict[str, dict[str | None, list[str]]] = {}
    section: dict[str | None, list[str]] | None = None
    sub: str | None = None
    for raw in body.splitlines():
        line = raw.rstrip()
        if line.startswith("## "):
            section = out.setdefault(line[3:].strip(), {})
            sub = None
        elif line.startswith("### ") and section is not None:
            sub = line[4:].strip()
        elif section is not None and (line.startswith(("- ", "* ")) or line in ("-", "*")):
            bullet = line[2:].strip()
            if bullet:
                section.setdefault(sub, []).append(bullet)
    for title, parts in out.items():
        if parts == {None: [NONE]}:
            out[title] = {}
    return out


def _sub(parts: dict[str | None, list[str]], name: str) -> list[str]:
    """Bullets under the sub-heading that starts with ``name`` (case-insensitive)."""
    want = name.split(" (")[0].lower()
    return [
        bullet
        for sub, bullets in parts.items()
        if sub is not None and sub.lower().startswith(want)
        for bullet in bullets
    ]


class _Builder:
    """Facts in document order, ids from 1, turn 0 (they come from before this session)."""

    def __init__(self, session: str | None) -> None:
        self.facts: list[Fact] = []
        self.session = session

    def add(self, kind: str, key: str, text: str, status: str = "open", **kw: Any) -> Fact:
        fact = Fact(len(self.facts) + 1, kind, key, text, 0, status=status, **kw)
        fact.session = self.session
        self.facts.append(fact)
        return fact

    def file(self, bullet: str, status: str) -> Fact:
        match = _FILE_BULLET.match(bullet)
        if not match:
            return self.add("file", bullet, bullet, status)
        detail = {"op": match["op"]}
        if match["commit"]:
            detail["commit"] = match["commit"]
            if match["message"] is not None:
                detail["message"] = match["message"]
        return self.add("file", match["path"], bullet, status, detail=detail)


def _with_recall(bullet: str) -> tuple[str, str | None]:
    match = _RECALL_SUFFIX.match(bullet)
    return (match["text"], match["id"]) if match else (bullet, None)


def _rule_key(kind: str, bullet: str) -> tuple[str, dict[str, Any]]:
    """The key the tracker gives this decision or constraint (``use:X|Y``, ``rule:words``), so
    a later "use Z instead of X" supersedes a decision read back from a checkpoint and
    restating a constraint is no duplicate; the bullet itself when it is not one the tracker
    would recognise (a hand-written line)."""
    found = [(k, key) for k, key, _line in extract.decisions_in(bullet, "user")]
    if len(found) != 1 or found[0][0] != kind:
        return bullet, {}
    key = found[0][1]
    if kind != "decision":
        return key, {}
    x, _, y = key[4:].partition("|")
    return key, {"use": x, "instead_of": y or None, "by": "user"}


def parse_facts(body: str, session: str | None = None) -> FactBook:
    """Rebuild facts from a checkpoint body (see the module docstring)."""
    sections = _sections(body)
    build = _Builder(session)
    changed = sections.get(SECTIONS[0], {})
    history: list[Fact] = []
    for bullet in changed.get(None, []):
        if _FILE_BULLET.match(bullet):
            history.append(build.file(bullet, "superseded"))
        else:  # a hand-written "what was done" line: keep it, as a command
            build.add("command", bullet, bullet)
    for bullet in _sub(changed, SUB_COMMANDS):
        text, entry = _with_recall(bullet)
        # the key the tracker gives a command is its command line, shown in backticks
        quoted = _BACKTICKED.search(text)
        build.add("command", quoted[1] if quoted else text, text, entry_id=entry)

    for bullet in _sub(changed, SUB_FIXED):
        match = _FIXED_SUFFIX.match(bullet)
        text = match["text"] if match else bullet
        detail = {"resolved_by": match["by"]} if match else {}
        build.add("error", text, text, "resolved", detail=detail)

    why = sections.get(SECTIONS[1], {})
    for bullet in why.get(None, []):
        build.add("goal", "goal", bullet)
    for bullet in _sub(why, SUB_EARLIER):
        build.add("goal", "goal", bullet, "superseded")

    issues = sections.get(SECTIONS[2], {})
    for bullet in issues.get(None, []):
        match = _ERROR_SUFFIX.match(bullet)
        text, command, entry = bullet, None, None
        if match:
            text, command = match["text"], match["command"]
            entry = match["id1"] or match["id2"]
        detail = {"command": command} if command is not None else {}
        build.add("error", text, text, entry_id=entry, detail=detail)
    for bullet in _sub(issues, SUB_FAILED):
        text, entry = _with_recall(bullet)
        build.add("failed", text, text, entry_id=entry)

    decisions = sections.get(SECTIONS[3], {})
    for bullet in decisions.get(None, []):
        key, detail = _rule_key("decision", bullet)
        build.add("decision", key, bullet, detail=detail)
    for bullet in _sub(decisions, SUB_CONSTRAINTS):
        key, detail = _rule_key("constraint", bullet)
        build.add("constraint", key, bullet, detail=detail)

    for bullet in sections.get(SECTIONS[5], {}).get(None, []):
        # the live state of a file that also appears in What changed is that history line
        same = [f for f in history if f.status == "superseded" and f.text == bullet]
        if same:
            same[-1].status = "open"
        else:
            build.file(bullet, "open")

    # Next steps are derived from the facts above; a line the user added or changed there is
    # a request of theirs, so it becomes the goal to continue with.
    derived = set(_next_steps(FactBook(build.facts))) | {NONE_RECORDED}
    for bullet in sections.get(SECTIONS[4], {}).get(None, []):
        if bullet not in derived:
            text = bullet[len("Continue: ") :] if bullet.startswith("Continue: ") else bullet
            build.add("goal", "goal", text)
    return FactBook(build.facts)


def parse_checkpoint(text: str, path: Path | None = None) -> Checkpoint:
    problems = validate(text)
    if problems:
        raise CheckpointError("; ".join(problems))
    meta, body = _split(text)
    session = str(meta["session"])
    note = meta.get("note")
    return Checkpoint(
        path=path,
        created=_normal_created(meta["created"]) or "",
        trigger=str(meta["trigger"]),
        session=session,
        project=str(meta["project"]),
        verified=bool(meta["verified"]),
        note=None if note is None else str(note),
        body=body.lstrip("\n"),
        facts=parse_facts(body, session),
    )


# --------------------------------------------------------------------------- files


def _stamp_verified(text: str) -> str:
    problems = validate(text)
    if problems:
        raise CheckpointError("not a valid checkpoint: " + "; ".join(problems))
    meta, body = _split(text)
    meta = dict(meta, verified=True, created=_normal_created(meta["created"]))
    return _front_matter(meta) + body


def _name_time(path: Path) -> tuple[str, int] | None:
    match = _NAME.match(path.name)
    return (match["stamp"], int(match["seq"] or 0)) if match else None


def _sort_key(path: Path) -> tuple[str, int, str]:
    named = _name_time(path)
    if named is not None:
        return (*named, path.name)
    try:  # a file someone renamed: place it by its modification time
        mtime = path.stat().st_mtime
    except OSError:
        mtime = 0.0
    return (datetime.fromtimestamp(mtime, timezone.utc).strftime(_STAMP), 0, path.name)


def list_checkpoints(folder: Path) -> list[Path]:
    """Checkpoint files, newest first: ``*.md`` only, so temp files are never candidates."""
    folder = Path(folder)
    try:
        paths = [p for p in folder.iterdir() if p.suffix == ".md" and not p.name.startswith(".")]
    except OSError:
        return []
    return sorted((p for p in paths if p.is_file()), key=_sort_key, reverse=True)


def _unique_path(folder: Path) -> Path:
    stamp = datetime.now(timezone.utc).strftime(_STAMP)
    path = folder / f"{stamp}.md"
    seq = 1
    while path.exists():
        path = folder / f"{stamp}-{seq}.md"
        seq += 1
    return path


def _fsync_dir(folder: Path) -> None:
    """Make the rename itself durable; not every platform can open a directory."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_checkpoint(
    folder: Path, text: str, *, keep: int = 20, max_age_days: float = 30.0
) -> Path:
    """Write ``text`` as a new checkpoint in ``folder`` and return its path; raises
    CheckpointError (earlier checkpoints untouched, no temp file left) if it cannot be saved
    and read back intact."""
    folder = Path(folder)
    final_text = _stamp_verified(text)
    data = final_text.encode("utf-8")
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=_TEMP_PREFIX, suffix=_TEMP_SUFFIX, dir=folder)
    except OSError as exc:
        raise CheckpointError(f"cannot write in {folder}: {exc.strerror or exc}") from exc
    tmp = Path(tmp_name)
    try:
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            back = tmp.read_bytes()
        except OSError as exc:
            raise CheckpointError(f"cannot write {tmp}: {exc.strerror or exc}") from exc
        if back != data:
            raise CheckpointError(f"read-back of {tmp} differs from what was written")
        problems = validate(back.decode("utf-8", "replace"))
        if problems:
            raise CheckpointError(f"read-back of {tmp} is invalid: " + "; ".join(problems))
        if _before_replace is not None:
            _before_replace(tmp)
        final = _unique_path(folder)
        try:
            os.replace(tmp, final)
        except OSError as exc:
            raise CheckpointError(f"cannot rename into {final}: {exc.strerror or exc}") from exc
    except BaseException:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise
    _fsync_dir(folder)
    prune(folder, keep=keep, max_age_days=max_age_days, spare=final)
    return final


def prune(
    folder: Path, *, keep: int = 20, max_age_days: float = 30.0, spare: Path | None = None
) -> list[Path]:
    """Delete checkpoints beyond the newest ``keep`` or older than ``max_age_days`` (by the
    time in their name; files with other names are the user's and are left alone), and temp
    files abandoned by a killed writer. Never fails: the new checkpoint is saved already."""
    folder = Path(folder)
    now = time.time()
    removed = []
    ours = [p for p in list_checkpoints(folder) if _name_time(p) is not None and p != spare]
    kept = 0 if spare is None else 1
    for path in ours:
        named = _name_time(path)
        assert named is not None  # ours are the named ones
        stamp = named[0]
        made = datetime.strptime(stamp, _STAMP).replace(tzinfo=timezone.utc).timestamp()
        too_old = now - made > max_age_days * 86400
        if kept < max(keep, 1) and not too_old:
            kept += 1
            continue
        try:
            path.unlink()
            removed.append(path)
        except OSError as exc:
            log.debug("could not prune %s: %s", path, exc)
    try:
        temps = list(folder.glob(f"{_TEMP_PREFIX}*{_TEMP_SUFFIX}"))
    except OSError:
        temps = []
    for tmp in temps:
        try:
            if now - tmp.stat().st_mtime > STALE_TEMP_SECONDS:
                tmp.unlink()
                removed.append(tmp)
        except OSError:
            pass
    return removed


def read_checkpoint(path: Path) -> Checkpoint:
    """Parse the file at ``path``; CheckpointError says what is wrong with it. Only a regular
    file is opened, without blocking: a FIFO or a device named as a checkpoint must not hang
    the session."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise CheckpointError(f"cannot read: {exc.strerror or exc}") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise CheckpointError("not a regular file")
        if info.st_size > MAX_BYTES:
            raise CheckpointError(f"larger than {MAX_BYTES >> 20} MB")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            raw = fh.read(MAX_BYTES + 1)
    except OSError as exc:
        raise CheckpointError(f"cannot read: {exc.strerror or exc}") from exc
    finally:
        os.close(fd)
    if b"\x00" in raw:
        raise CheckpointError("binary data, not text")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CheckpointError(f"not UTF-8 text (byte {exc.start})") from exc
    return parse_checkpoint(text, path)


def _log_warning(message: str) -> None:
    log.warning("%s", message)


def same_project(a: str | Path, b: str | Path) -> bool:
    """Two project paths name the same folder (symlinks and trailing slashes aside)."""
    if not str(a).strip() or not str(b).strip():
        return False
    return os.path.realpath(os.path.expanduser(str(a))) == os.path.realpath(
        os.path.expanduser(str(b))
    )


def _created_at(checkpoint: Checkpoint) -> float | None:
    try:
        return (
            datetime.strptime(checkpoint.created, _CREATED).replace(tzinfo=timezone.utc).timestamp()
        )
    except ValueError:
        return None


def why_unusable(checkpoint: Checkpoint, project: str | None, now: float | None = None) -> str:
    """Why a checkpoint must not be taken as this project's latest ("" when it may): one of
    another project, or one dated in the future, which would stay "latest" for ever. Both are
    what a planted or copied file looks like."""
    if project is not None and not same_project(checkpoint.project, project):
        return f"of another project: {checkpoint.project or 'none named'}"
    made = _created_at(checkpoint)
    now = time.time() if now is None else now
    if made is not None and made > now + FUTURE_SLACK_SECONDS:
        return f"dated in the future: {checkpoint.created}"
    named = _name_time(checkpoint.path) if checkpoint.path is not None else None
    if named is not None:
        stamp = datetime.strptime(named[0], _STAMP).replace(tzinfo=timezone.utc).timestamp()
        if stamp > now + FUTURE_SLACK_SECONDS:
            return "named for a future time"
    return ""


def load_latest(
    folder: Path,
    *,
    warn: Callable[[str], None] = _log_warning,
    project: str | None = None,
    now: float | None = None,
) -> Checkpoint | None:
    """The newest valid checkpoint of ``project`` (any project when None), or None. Corrupt
    files, other projects' checkpoints and future-dated ones met on the way are skipped and
    reported through ``warn`` in one line."""
    skipped: list[str] = []
    found = None
    for path in list_checkpoints(folder):
        try:
            checkpoint = read_checkpoint(path)
        except CheckpointError as exc:
            skipped.append(f"{path.name} (corrupt: {exc})")
            continue
        reason = why_unusable(checkpoint, project, now)
        if reason:
            skipped.append(f"{path.name} ({reason})")
            continue
        found = checkpoint
        break
    if skipped:
        shown = "; ".join(skipped[:3]) + (f"; +{len(skipped) - 3} more" if len(skipped) > 3 else "")
        warn(f"gardener: skipped {_plural(len(skipped), 'checkpoint')}: {shown}")
    return found


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


# --------------------------------------------------------------------------- across sessions

# What a new session inherits from the latest checkpoint without /resume: the facts that stay
# true until someone changes them (a goal, the files in the chat and the commands run belong to
# the session that had them, and /resume brings those back).
CARRIED_KINDS = ("decision", "constraint", "error", "failed")
# Per kind, the newest this many: what no session resolves must not grow without end (the older
# ones stay in the older checkpoint files).
MAX_CARRIED = 20
_COUNT_NOUNS = (
    ("decision", "decision", "decisions"),
    ("constraint", "constraint", "constraints"),
    ("error", "open error", "open errors"),
    ("failed", "failed approach", "failed approaches"),
    ("file", "file", "files"),
)


def carried_facts(book: FactBook) -> FactBook:
    """The facts of ``book`` a session that does not resume still starts with: live decisions
    and constraints, open errors, failed approaches. Without them, a short session's exit
    checkpoint would become the latest and the next session would lose them."""
    keep = [
        f
        for f in sorted(book.find(), key=order_key)
        if f.kind in CARRIED_KINDS and (f.kind != "error" or f.status == "open")
    ]
    for kind in CARRIED_KINDS:
        of_kind = [f for f in keep if f.kind == kind]
        drop = {id(f) for f in of_kind[: max(0, len(of_kind) - MAX_CARRIED)]}
        keep = [f for f in keep if id(f) not in drop]
    out = []
    for n, fact in enumerate(keep, 1):
        copy = Fact.from_dict(fact.to_dict())
        copy.id, copy.turn, copy.superseded_by = n, 0, None
        copy.detail = dict(fact.detail, carried=True)
        out.append(copy)
    return FactBook(out)


def fact_counts(book: FactBook) -> dict[str, int]:
    """Live facts by what a person calls them: decisions, constraints, open errors, failed
    approaches, files."""
    counts = {}
    for kind, _one, _many in _COUNT_NOUNS:
        facts = book.find(kind)
        if kind == "error":
            facts = [f for f in facts if f.status == "open"]
        counts[kind] = len(facts)
    return counts


def describe_counts(book: FactBook, kinds: Sequence[str] | None = None) -> str:
    """``2 decisions, 1 constraint, 1 open error`` (kinds with none left out); "no facts"."""
    counts = fact_counts(book)
    parts = [
        f"{counts[kind]} {one if counts[kind] == 1 else many}"
        for kind, one, many in _COUNT_NOUNS
        if counts[kind] and (kinds is None or kind in kinds)
    ]
    return ", ".join(parts) or "no facts"


def find_checkpoint(folder: Path, name: str, base: Path | None = None) -> Checkpoint:
    """The checkpoint ``/resume NAME`` means: a file in ``folder`` by its name, with or without
    ``.md``, or by a prefix of it that only one checkpoint has; else a path (absolute, or
    relative to the working directory or to ``base``, the project root) to a file that parses as
    a checkpoint. Raises CheckpointError saying what matched. A path that is not a checkpoint
    gets the same answer whether or not the file exists: /resume is no way to probe the disk."""
    raw = name.strip().strip("'\"")
    if not raw:
        raise CheckpointError("no checkpoint name given")
    folder = Path(folder)
    paths = list_checkpoints(folder)
    names = [p.name for p in paths]
    given = Path(raw).expanduser()
    in_folder = None
    if not given.is_absolute() and len(given.parts) == 1:
        bare = given.name
        for exact in (bare, bare + ".md"):
            if exact in names:
                in_folder = folder / exact
                break
        else:
            matches = [n for n in names if n.startswith(bare)]
            if len(matches) > 1:
                shown = ", ".join(matches[:5])
                more = f" and {len(matches) - 5} more" if len(matches) > 5 else ""
                raise CheckpointError(f"{raw!r} matches {len(matches)} checkpoints: {shown}{more}")
            if matches:
                in_folder = folder / matches[0]
    if in_folder is not None:
        return read_checkpoint(in_folder)  # ours: say what is wrong with it
    candidates = [given]
    if base and not given.is_absolute():
        candidates.append(Path(base) / given)
    for candidate in candidates:
        try:
            return read_checkpoint(candidate)
        except CheckpointError:
            continue
    raise CheckpointError("not a checkpoint name or checkpoint file (/checkpoints lists them)")

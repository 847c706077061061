"""The structured facts of a session: what the model must not lose when history is squeezed.

A fact is one line of exact, checkable information (a path, a commit hash and message, an error
line, a decision in the user's words) with where it came from (turn, stored entry). Facts are
extracted algorithmically as messages and Aider's events arrive (see tracker.py); the session
state block (state.py) and checkpoints (checkpoint.py) are rendered from them, and resuming a
session reads them back from a checkpoint.

Facts are never edited in place once another fact replaces them: the old one is marked
``superseded`` (with the id of its successor), so a checkpoint can still tell the story.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Iterator

from ..redact import redact

LINE_MAX = 200  # a fact's text is one line of at most this many characters


@dataclass(frozen=True)
class ErrorSig:
    """One error in an output. ``key`` is stable across runs of the same failure (addresses,
    timings, temp paths and line numbers stripped); ``line`` is what the user saw, verbatim but
    clipped. ``kind``: ``test`` (a failing test id), ``compile`` (a compiler or type-checker
    diagnostic), ``lint``, ``exception`` (``Type: message``, panics) or ``error`` (a tool's
    ``error:``/``fatal:`` line) or ``log`` (a FATAL/ERROR-level log line).
    ``test``/``compile``/``lint`` outputs list every problem, so a
    re-run without one means it is gone; an exception stops the program, hiding what follows."""

    key: str
    line: str
    kind: str


LISTING_KINDS = frozenset({"test", "compile", "lint"})


def clip(text: str, limit: int = LINE_MAX) -> str:
    """One line of at most ``limit`` characters: newlines and tabs become spaces, lone
    surrogates (undecodable bytes) ``?``, so the line can be stored and printed."""
    line = " ".join(text[: 4 * limit + 64].split())
    if len(line) > limit:
        line = line[: limit - 1].rstrip() + "…"
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:
        line = line.encode("utf-8", "replace").decode("utf-8")
    return line


# kind -> what a fact of that kind records
KINDS = {
    "goal": "the user's latest substantive request",
    "file": "a file operation: added, read-only, created, edited (with commit), dropped",
    "error": "an error or failing test, the command that produced it, and its resolution",
    "failed": "an approach that did not work: an edit followed by the same failure, an undo,"
    " the user saying it did not work",
    "decision": "a choice stated by the user or agreed in a reply (use X instead of Y)",
    "constraint": "a rule stated by the user (must support …, don't …, never …)",
    "command": "a command run, with its outcome",
}
STATUSES = ("open", "resolved", "superseded")


@dataclass
class Fact:
    """One fact. ``key`` groups facts about the same thing (a path, an error signature, a
    command line, a decision's subject): a newer fact with the same ``(kind, key)`` usually
    supersedes the older one. ``text`` is the one line shown to the model and written to
    checkpoints; it keeps identifiers verbatim. ``detail`` holds kind-specific fields, e.g.
    ``{"op": "edited", "commit": "a1b2c3d", "message": "fix parser"}`` for a file, or
    ``{"command": "pytest -q", "resolved_by": "edit of src/app.py in turn 7"}`` for an error."""

    id: int
    kind: str
    key: str
    text: str
    turn: int
    entry_id: str | None = None
    status: str = "open"
    superseded_by: int | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    session: str | None = None  # the session that produced it (set for facts read back on resume)

    def __post_init__(self) -> None:
        # Facts travel: into every request's state block, checkpoints, the next session. A key
        # in a command line or an error line stays in the stored original only (redact.py).
        self.key, self.text = redact(self.key), redact(self.text)
        self.detail = _redacted(self.detail)

    @property
    def live(self) -> bool:
        return self.status != "superseded"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Fact":
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        return cls(**known)


class FactBook:
    """The session's facts, in the order they were learnt. Not thread safe: the gardener
    touches it only from Aider's main thread."""

    def __init__(self, facts: Iterable[Fact] = ()) -> None:
        self._facts: list[Fact] = []
        self._next = 1
        self.version = 0  # bumped on every change: the state block is re-rendered only then
        for fact in facts:
            self._append(fact)

    def _append(self, fact: Fact) -> Fact:
        self._facts.append(fact)
        self._next = max(self._next, fact.id + 1)
        self.version += 1
        return fact

    def __iter__(self) -> Iterator[Fact]:
        return iter(self._facts)

    def __len__(self) -> int:
        return len(self._facts)

    def add(
        self,
        kind: str,
        key: str,
        text: str,
        turn: int,
        *,
        entry_id: str | None = None,
        status: str = "open",
        detail: dict[str, Any] | None = None,
        supersede: bool = True,
    ) -> Fact:
        """Record a fact; with ``supersede`` the live facts of the same kind and key are marked
        superseded by it. Adding a fact identical to the live one (same text, status and
        detail: a second edit of a file is a new fact, its detail names the new attempt) is a
        no-op that returns the existing fact, so the book (and the state block) stays stable."""
        if kind not in KINDS:
            raise ValueError(f"unknown fact kind {kind!r}")
        key, text, detail = redact(key), redact(text), _redacted(detail or {})
        current = self.current(kind, key)
        if (
            current is not None
            and current.text == text
            and current.status == status
            and current.detail == dict(detail or {})
        ):
            return current
        fact = Fact(self._next, kind, key, text, turn, entry_id, status, detail=dict(detail or {}))
        if supersede:
            for old in self.find(kind, key):
                old.status, old.superseded_by = "superseded", fact.id
        return self._append(fact)

    def update(self, fact: Fact, **changes: Any) -> Fact:
        """Change a live fact's status/text/detail in place (e.g. an error becoming resolved)."""
        for name, value in changes.items():
            if name == "detail":
                fact.detail.update(_redacted(value))
            else:
                setattr(fact, name, redact(value) if isinstance(value, str) else value)
        self.version += 1
        return fact

    def remove(self, ids: Iterable[int]) -> list[Fact]:
        """Take facts out of the book (``/forget``: what the user removed must not live on in
        the state block or a checkpoint); the removed facts."""
        gone = set(ids)
        removed = [f for f in self._facts if f.id in gone]
        if removed:
            self._facts = [f for f in self._facts if f.id not in gone]
            self.version += 1
        return removed

    def find(
        self, kind: str | None = None, key: str | None = None, live: bool = True
    ) -> list[Fact]:
        key = None if key is None else redact(key)  # keys are stored redacted
        return [
            f
            for f in self._facts
            if (kind is None or f.kind == kind)
            and (key is None or f.key == key)
            and (not live or f.live)
        ]

    def current(self, kind: str, key: str) -> Fact | None:
        found = self.find(kind, key)
        return found[-1] if found else None

    def get(self, fact_id: int) -> Fact | None:
        for fact in self._facts:
            if fact.id == fact_id:
                return fact
        return None

    def to_list(self) -> list[dict[str, Any]]:
        return [f.to_dict() for f in self._facts]

    @classmethod
    def from_list(cls, items: Iterable[dict[str, Any]]) -> "FactBook":
        return cls(Fact.from_dict(item) for item in items)


def _redacted(detail: dict[str, Any]) -> dict[str, Any]:
    return {k: redact(v) if isinstance(v, str) else v for k, v in detail.items()}

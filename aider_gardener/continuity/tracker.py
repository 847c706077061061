"""Turn Aider's messages and events into the session's facts, as they happen.

The tracker is told what happens (a prompt, a reply, a command's output, files added, an edit
applied, a commit, an undo) and keeps a ``FactBook`` current, holding just enough state to relate
events across turns: the edits of each attempt, and for each error signature and command the
edit counter when it was last seen, so "the same failure after an edit" compares two counters.
The rules favour precision, since a wrong fact misleads every later turn: errors come only from
output that shows them happening; one is resolved when its command runs again completely without
it, or when someone says it is fixed; an attempt failed when its error comes back after it, the
user says so, or it is undone; a new decision supersedes the live one it contradicts. Every
``on_*`` method is total (any input updates what it can and never raises; a bug logs one debug
line), because the caller is Aider's main loop.

Rules in full: docs/decisions/020-fact-tracker-rules.md
"""

from __future__ import annotations

import functools
import logging
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, TypeVar

from ..lazy import lazy_module
from ..store.priority import normalize_path
from .facts import LINE_MAX, LISTING_KINDS, ErrorSig, Fact, FactBook, clip

# the extractors load at the first message, not at Aider's start (their regexes cost ~50 ms)
extract = lazy_module("aider_gardener.continuity.extract")

log = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Any])

MAX_PATHS_SHOWN = 3
EDIT_OPS = ("edited", "created")
UNDONE = "undone"
DID_NOT_FIX = "did not fix: "
SIGNATURE_KINDS = ("test:", "compile:", "lint:", "exception:", "error:", "exit:", "log:")
MAX_COMMAND = 120
MAX_PATH = 1000
NO_COMMAND = "(output)"
USER_CLAIM_TURNS = 2  # how far back the user's "that works now" reaches


def _total(default: Any = None) -> Callable[[F], F]:
    """Never let a tracker bug reach Aider: log it once at debug level and carry on."""

    def wrap(fn: F) -> F:
        @functools.wraps(fn)
        def inner(self: "FactTracker", *args: Any, **kwargs: Any) -> Any:
            try:
                return fn(self, *args, **kwargs)
            except Exception as err:  # noqa: BLE001 - the tracker must never crash Aider
                if fn.__name__ not in self._warned:
                    self._warned.add(fn.__name__)
                    log.debug("gardener: fact tracker %s failed: %r", fn.__name__, err)
                return default() if callable(default) else default

        return inner  # type: ignore[return-value]

    return wrap


def _text(value: Any) -> str:
    """Any value as text SQLite and a terminal can hold (lone surrogates replaced)."""
    if value is None:
        return ""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace")
    text = value if isinstance(value, str) else str(value)
    if len(text) > 4096:
        return text  # large texts are only scanned; what is kept of them goes through clip()
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text


def _paths(value: Any) -> list[str]:
    """A path or an iterable of paths as clean, distinct, non-empty strings, in order."""
    if value is None:
        return []
    items = [value] if isinstance(value, (str, bytes)) else value
    out: dict[str, None] = {}
    try:
        for item in items:
            if isinstance(item, bytes):
                item = item.decode("utf-8", "replace")
            path = clip(_text(item), MAX_PATH)
            if path:
                out.setdefault(path, None)
    except TypeError:
        path = clip(_text(value), MAX_PATH)
        return [path] if path else []
    return list(out)


def _hash(value: Any) -> str:
    """A commit hash as one token (Aider passes the short hash)."""
    words = clip(_text(value), 200).split()
    return words[0][:40] if words else ""


def _turn(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return 0


def _entry(value: Any) -> str | None:
    text = _text(value).strip()
    return text or None


def command_key(command: Any) -> str:
    """``/run  pytest -q`` -> ``pytest -q``: how a command is recognised when it runs again."""
    text = clip(_text(command), 4 * MAX_COMMAND)
    for prefix in ("/run ", "/test ", "/lint ", "!"):
        if text.startswith(prefix):
            text = text[len(prefix) :].strip()
            break
    return text[:MAX_COMMAND].strip() or NO_COMMAND


def _compose(head: str, body: str, tail: str = "") -> str:
    """``head + body + tail`` in at most ``LINE_MAX`` characters: the body is clipped so the
    identifiers in head and tail survive."""
    room = LINE_MAX - len(head) - len(tail)
    if room < 20:
        return clip(head + body + tail)
    return clip(head + clip(body, room) + tail)


@dataclass
class _Attempt:
    """The edits applied for one turn."""

    id: int
    turn: int
    seq: int  # the edit counter after its latest edit
    paths: list[str] = field(default_factory=list)
    commits: list[tuple[str, str]] = field(default_factory=list)
    reply_entry: str | None = None
    reasons: list[str] = field(default_factory=list)  # why it failed, in order
    entries: list[str] = field(default_factory=list)  # outputs/prompts showing it failed
    undone: bool = False
    resolved: list[int] = field(default_factory=list)  # error facts it resolved
    user_failed: bool = False

    def describe(self) -> str:
        shown = ", ".join(self.paths[:MAX_PATHS_SHOWN])
        if len(self.paths) > MAX_PATHS_SHOWN:
            shown += f" +{len(self.paths) - MAX_PATHS_SHOWN} more"
        where = f"commit {self.commits[-1][0]}" if self.commits else "uncommitted"
        if self.commits and self.commits[-1][1]:
            where += f" {clip(self.commits[-1][1], 60)}"
        return f"edit of {shown or '?'} ({where}, turn {self.turn})"


@dataclass
class _FileState:
    """A file's latest operation. ``key`` is the path as first seen (separators normalised,
    case kept): the state block shows it, so it must stay the user's spelling."""

    key: str
    op: str | None = None  # "added", "read-only", "dropped", "edited", "created", "undone"
    commit: str | None = None
    message: str | None = None
    undone: int | None = None

    def render(self) -> str:
        text = self.op or "seen"
        if self.op in (*EDIT_OPS, UNDONE) and self.commit:
            text += f", commit {self.commit}" + (f" {self.message}" if self.message else "")
        if self.op == UNDONE and self.undone is not None:
            text += f" (in turn {self.undone})"
        return _compose(f"{self.key}: ", text)


@dataclass
class _ErrorState:
    seen_seq: int  # the edit counter when last seen
    commands: set[str] = field(default_factory=set)
    failed_again: int = 0
    families: set[str] = field(default_factory=set)  # ``extract.command_family`` of those
    runner: str | None = None  # the test runner whose output showed it


class FactTracker:
    """Aider's messages and events in, facts out.

    The rules: docs/decisions/020-fact-tracker-rules.md."""

    def __init__(self, book: FactBook | None = None) -> None:
        self.book = book if book is not None else FactBook()
        self._warned: set[str] = set()
        self._seq = 0  # edits applied so far
        self._attempts: list[_Attempt] = []
        self._next_attempt = 1
        self._ran_since_edit = False  # an output or prompt came after the latest edit
        self._files: dict[str, _FileState] = {}
        self._errors: dict[str, _ErrorState] = {}
        self._commands: dict[str, int] = {}  # command key -> edit counter at its last run
        self._families: set[str] = set()  # ``extract.command_family`` of the commands run
        self._last_failure: set[str] = set()  # error keys of the latest output that had any
        self._last_failure_turn = -1
        self._prompt_seq = 0  # the edit counter at the latest prompt
        self._last_reply: tuple[int, str | None] = (-1, None)
        self._adopted: dict[str, Fact] = {}  # open errors read back without a signature
        self._adopt(self.book)

    # -- events ----------------------------------------------------------------------------

    @_total()
    def on_prompt(self, text: Any, turn: Any, entry_id: Any = None) -> None:
        """A user message: a new goal, decisions and constraints, or "that didn't work"."""
        prompt, turn, entry = _text(text)[: extract.MAX_MESSAGE], _turn(turn), _entry(entry_id)
        if extract.is_aider_message(prompt):
            # Aider's own wrapper or reflection, not the user's words; but the model is asked
            # again, so the edits that follow are a new try
            self._ran_since_edit = True
            return
        failed = extract.says_failed(prompt)
        self._said_fixed(prompt, "user", turn)
        if failed:
            attempts = self._attempts_since(self._prompt_seq) or self._latest_unblamed()
            said = clip(prompt, 80)
            for attempt in attempts:
                if not attempt.user_failed:
                    attempt.user_failed = True
                    self._fail(attempt, f'user said "{said}" (turn {turn})', turn, entry)
        body = _strip_mode(prompt)
        rules = extract.decisions_in(body, "user") if not body.startswith("/") else []
        # A prompt that only states rules ("use httpx instead of requests") keeps the goal.
        only_rules = bool(rules) and len(list(extract.sentences(body))) <= len(rules)
        # A question about the work keeps the goal it is about; a first one is the goal.
        asked = extract.is_question(body) and bool(self.book.find("goal"))
        if not failed and not only_rules and not asked and extract.is_substantive(prompt):
            words = " ".join(x for x in extract.prose_lines(body) if x)
            self.book.add("goal", "goal", clip(words or body), turn, entry_id=entry)
        for kind, key, line in rules:
            self._decide(kind, key, line, turn, entry, by="user")
        self._prompt_seq = self._seq
        self._ran_since_edit = True

    @_total()
    def on_reply(self, text: Any, turn: Any, entry_id: Any = None) -> None:
        """An assistant reply: decisions it agrees to, and a fix it reports ("Fixed.", "all
        tests pass")."""
        reply, turn, entry = _text(text)[: extract.MAX_MESSAGE], _turn(turn), _entry(entry_id)
        self._last_reply = (turn, entry)
        self._said_fixed(reply, "assistant", turn)
        for kind, key, line in extract.decisions_in(reply, "assistant"):
            self._decide(kind, key, line, turn, entry, by="assistant")

    @_total()
    def on_output(
        self,
        command: Any,
        output: Any,
        turn: Any,
        entry_id: Any = None,
        exit_code: Any = None,
    ) -> None:
        """A command's output (``/run``, ``/test``, lint, a shell command Aider ran)."""
        cmd, turn, entry = command_key(command), _turn(turn), _entry(entry_id)
        raw_command = _text(command) or None
        family = clip(extract.command_family(raw_command), 4 * MAX_COMMAND) or cmd
        code = _exit_code(exit_code)
        if extract.is_rejection(_text(output)):
            return  # declined by the user: the command did not run, nothing to learn
        scan = extract.scan_output(_text(output), raw_command)
        errors = list(scan.errors)
        if extract.answer_exit(raw_command, code):
            code = 0  # grep found nothing, diff found differences: an answer, not a failure
            errors = [e for e in errors if e.kind != "exit" and not _exit_only(e)]
        if code in (None, 0) and extract.prints_files(raw_command):
            errors = []  # the text of files (a docstring's "Raises: ValueError"), not errors
        elif code == 0:
            errors = extract.real_errors(errors, _text(output))
        if not errors and code is not None and code != 0:
            errors.append(_exit_error(family, code, _text(output)))
        for sig in errors:
            self._claim_adopted(sig, cmd, family)
        present = {e.key for e in errors}
        ran_before = cmd in self._commands or family in self._families
        # A view of part of the output (``| head``, ``| grep -v``) does not show an error gone,
        # unless the runner's verdict (test counts) is in it.
        complete = (
            code == 0
            or not errors
            or bool(scan.counts)
            or all(e.kind in LISTING_KINDS for e in errors)
        ) and (bool(scan.counts) or not extract.partial_output(raw_command))
        if ran_before and complete:
            self._resolve_missing(cmd, family, present, turn)
        if complete and scan.counts:
            self._resolve_passed_tests(raw_command or cmd, scan.runner, present, turn)
        repeated: dict[int, list[ErrorSig]] = {}
        for sig in errors:
            attempt = self._seen(sig, cmd, turn, entry, family, scan.runner)
            if attempt is not None:
                repeated.setdefault(attempt.id, []).append(sig)
        for attempt_id, sigs in repeated.items():
            attempt = self._attempt(attempt_id)
            if attempt is None:
                continue
            more = f" (+{len(sigs) - 1} more)" if len(sigs) > 1 else ""
            self._fail(attempt, f"{DID_NOT_FIX}{sigs[0].line}{more}", turn, entry)
        self._commands[cmd] = self._seq
        self._families.add(family)
        if errors:
            self._last_failure, self._last_failure_turn = set(present), turn
        self._ran_since_edit = True
        outcome = _outcome(scan.counts, errors, code, len(scan.errors))
        self.book.add(
            "command",
            cmd,
            _compose(f"`{cmd}` -> ", outcome),
            turn,
            entry_id=entry,
            status="open" if errors else "resolved",
            detail={
                "command": cmd,
                "exit_code": code,
                "counts": dict(scan.counts),
                "errors": len(errors),
                "ok": not errors,
            },
        )

    @_total()
    def on_files_added(self, paths: Any, turn: Any, read_only: Any = False) -> None:
        turn = _turn(turn)
        for path in _paths(paths):
            self._file_event(path, turn, "read-only" if read_only else "added")

    @_total()
    def on_files_dropped(self, paths: Any, turn: Any) -> None:
        """``paths`` None: every file in the chat (Aider's bare ``/drop``)."""
        turn = _turn(turn)
        if paths is None:
            targets = [f.key for f in self._files.values() if f.op not in (None, "dropped")]
        else:
            targets = _paths(paths)
        for path in targets:
            self._file_event(path, turn, "dropped")

    @_total()
    def on_edit_applied(self, paths: Any, turn: Any, created: Any = ()) -> None:
        turn = _turn(turn)
        new = _paths(created)
        edited = _paths(paths)
        everything = edited + [p for p in new if p not in edited]
        if not everything:
            return
        self._seq += 1
        attempt = self._attempts[-1] if self._attempts else None
        # One attempt is the edits of one turn up to the next output or prompt: Aider's
        # lint/test reflections edit again within the same turn, and that is a new try.
        if attempt is None or attempt.turn != turn or attempt.undone or self._ran_since_edit:
            reply_turn, reply_entry = self._last_reply
            attempt = _Attempt(
                id=self._next_attempt,
                turn=turn,
                seq=self._seq,
                reply_entry=reply_entry if reply_turn == turn else None,
            )
            self._attempts.append(attempt)
            self._next_attempt += 1
        self._ran_since_edit = False
        attempt.seq = self._seq
        created_keys = {normalize_path(p) for p in new}
        for path in everything:
            if path not in attempt.paths:
                attempt.paths.append(path)
            op = "created" if normalize_path(path) in created_keys else "edited"
            state = self._file(path)
            if state.op == "created" and state.commit is None and op == "edited":
                op = "created"  # still the same, uncommitted creation
            state.op, state.commit, state.message, state.undone = op, None, None, None
            self._file_fact(state, turn, new_fact=True, extra={"attempt": attempt.id})

    @_total()
    def on_commit(self, commit_hash: Any, message: Any, paths: Any, turn: Any) -> None:
        """Aider committed: the hash and message go onto those files' facts."""
        commit = _hash(commit_hash)
        msg = clip(_text(message).strip().split("\n", 1)[0], 80) if message else ""
        turn = _turn(turn)
        if not commit:
            return
        targets = _paths(paths)
        attempt = self._attempt_for(targets)
        if not targets and attempt is not None:
            targets = list(attempt.paths)
        if attempt is not None and (commit, msg) not in attempt.commits:
            attempt.commits.append((commit, msg))
        for path in targets:
            state = self._file(path)
            fresh = state.op not in EDIT_OPS  # committed without an edit event: record one
            state.op = state.op if not fresh else "edited"
            state.commit, state.message, state.undone = commit, msg, None
            self._file_fact(state, turn, new_fact=fresh)

    @_total()
    def on_undo(self, commit_hash: Any, message: Any, turn: Any) -> None:
        """``/undo``: the attempt behind that commit failed; its files' facts say so, and the
        errors it resolved are open again."""
        commit = _hash(commit_hash)
        turn = _turn(turn)
        attempt = self._attempt_by_commit(commit) or self._latest_unundone()
        if attempt is None:
            return
        attempt.undone = True
        shown = f"commit {commit}" if commit else "the last edit"
        msg = clip(_text(message).split("\n", 1)[0], 60) if message else ""
        self._fail(attempt, f"undone: {shown}{' ' + msg if msg else ''} (turn {turn})", turn, None)
        commits = {c for c, _msg in attempt.commits}
        for path in attempt.paths:
            state = self._file(path)
            if state.op not in EDIT_OPS:
                continue
            if commit and state.commit and state.commit not in commits:
                continue  # changed again by a later commit, which was not undone
            state.op, state.undone = UNDONE, turn
            state.commit = state.commit or (commit or None)
            self._file_fact(state, turn, new_fact=False)
        for fact_id in attempt.resolved:
            fact = self.book.get(fact_id)
            if fact is not None and fact.live and fact.status == "resolved":
                self.book.update(
                    fact,
                    status="open",
                    text=fact.detail.get("line") or fact.text,
                    detail={"resolved_by": None, "reopened_turn": turn},
                )
                error = self._errors.get(fact.key)
                if error is not None:
                    error.seen_seq = self._seq

    @_total(default=0)
    def forget(self, entry_ids: Iterable[str]) -> int:
        """``/forget``: the facts only forgotten entries showed go with them (a file operation
        stays: it happened in the repository); a fact other entries showed too keeps those.
        How many facts went."""
        gone = set(entry_ids)
        doomed: set[int] = set()
        for fact in self.book:
            entries = set(_fact_entries(fact))
            if fact.kind == "file" or not entries & gone:
                continue
            if entries <= gone:
                doomed.add(fact.id)
            else:
                if fact.entry_id in gone:
                    fact.entry_id = None
                listed = fact.detail.get("entries")
                if listed:
                    fact.detail["entries"] = [e for e in listed if e not in gone]
        removed = self.book.remove(doomed)
        for fact in removed:
            if fact.kind == "error":
                self._errors.pop(fact.key, None)
        self._adopted = {k: f for k, f in self._adopted.items() if f.id not in doomed}
        self.book.version += 1
        return len(doomed)

    # -- for eviction ----------------------------------------------------------------------

    @_total(default=set)
    def failed_entry_ids(self) -> set[str]:
        """Stored entries that show a failed approach (the reply with the edit, the outputs
        and prompts that showed it failed): evicted only after everything else."""
        out: set[str] = set()
        for fact in self.book.find("failed"):
            out.update(_fact_entries(fact))
        return out

    @_total(default=set)
    def open_error_entry_ids(self) -> set[str]:
        """Stored entries showing an error that is still open: evicted only after everything
        else."""
        out: set[str] = set()
        for fact in self.book.find("error"):
            if fact.status == "open":
                out.update(_fact_entries(fact))
        return out

    # -- internals: errors -----------------------------------------------------------------

    def _seen(
        self,
        sig: ErrorSig,
        cmd: str,
        turn: int,
        entry: str | None,
        family: str = "",
        runner: str | None = None,
    ) -> _Attempt | None:
        """Record a sighting of ``sig``; the latest attempt it survived, if any."""
        fact = self.book.current("error", sig.key)
        state = self._errors.get(sig.key)
        if fact is None or fact.status != "open" or state is None:
            entries = [entry] if entry else []
            self.book.add(
                "error",
                sig.key,
                sig.line,
                turn,
                entry_id=entry,
                detail={
                    "command": cmd,
                    "line": sig.line,
                    "kind": sig.kind,
                    "first_turn": turn,
                    "entries": entries,
                },
            )
            self._errors[sig.key] = _ErrorState(
                self._seq, {cmd}, families={family or cmd}, runner=runner
            )
            return None
        # an edit that fixed another error was aimed at that one ("failed approach" in
        # docs/decisions/020-fact-tracker-rules.md)
        survived = [a for a in self._attempts_since(state.seen_seq) if not a.resolved]
        state.commands.add(cmd)
        state.families.add(family or cmd)
        state.runner = state.runner or runner
        state.seen_seq = self._seq
        entries = list(fact.detail.get("entries", []))
        if entry and entry not in entries:
            entries.append(entry)
        if survived:
            state.failed_again += 1
        detail = {"entries": entries[-8:], "last_turn": turn, "failed_again": state.failed_again}
        if detail != {k: fact.detail.get(k) for k in detail}:
            self.book.update(fact, detail=detail)
        return survived[-1] if survived else None

    def _resolve_missing(self, cmd: str, family: str, present: set[str], turn: int) -> None:
        for fact in self.book.find("error"):
            if fact.status != "open" or fact.key in present:
                continue
            state = self._errors.get(fact.key)
            if state is None or (cmd not in state.commands and family not in state.families):
                continue
            self._resolve(fact, state, turn)

    def _resolve_passed_tests(
        self, line: str, runner: str | None, present: set[str], turn: int
    ) -> None:
        """A complete test run that does not list a failing test it covers (the whole suite,
        or a path that holds the test) shows it passing, whatever line started the run."""
        for fact in self.book.find("error"):
            if fact.status != "open" or fact.key in present:
                continue
            test_id = _test_id(fact)
            state = self._errors.get(fact.key)
            if not test_id or state is None:
                continue
            if state.runner and runner and state.runner != runner:
                continue
            if _covers(line, test_id):
                self._resolve(fact, state, turn)

    def _said_fixed(self, text: str, who: str, turn: int) -> None:
        """The user or the assistant says it is fixed: "tests pass" closes the open failing
        tests, "the build succeeds" the compiler errors, "Fixed." or "that works now" the
        errors of the latest output that showed any, when it is the one being talked about:
        the assistant's in the same turn, the user's within ``USER_CLAIM_TURNS`` (the failure,
        the request to fix it, the verdict); a claim naming what it fixed ("Fixed the KeyError
        in parse()") closes only errors that name it too."""
        scope = extract.says_fixed(text)
        if scope is None:
            return
        back = 0 if who == "assistant" else USER_CLAIM_TURNS
        recent = self._last_failure_turn >= turn - back
        words = extract.claim_words(text) if scope == "any" else set()
        said = clip(text, 80)
        for fact in self.book.find("error"):
            if fact.status != "open":
                continue
            state = self._errors.get(fact.key)
            if state is None:
                continue
            kind = fact.detail.get("kind") or fact.key.split(":", 1)[0]
            if scope == "tests":
                hit = kind == "test" or bool(_test_id(fact)) or state.runner is not None
            elif scope == "build":
                hit = kind == "compile"
            else:
                hit = recent and fact.key in self._last_failure
                if hit and words:
                    line = str(fact.detail.get("line") or fact.text).lower()
                    hit = any(w in line for w in words)
            if hit:
                self._resolve(fact, state, turn, f'{who} said "{said}" (turn {turn})')

    def _resolve(self, fact: Fact, state: _ErrorState, turn: int, said: str | None = None) -> None:
        fixers = self._attempts_since(state.seen_seq)
        if fixers:
            fixers[-1].resolved.append(fact.id)
            self._acquit(fixers[-1], turn)
            by: str | None = fixers[-1].describe()
        else:
            by = None  # gone on a re-run without an edit in between
        detail = {
            "resolved_by": by,
            "resolved_turn": turn,
            "resolved_attempts": [a.id for a in fixers],
        }
        if said:
            detail["resolved_said"] = said
        self.book.update(fact, status="resolved", detail=detail)

    def _claim_adopted(self, sig: ErrorSig, cmd: str, family: str = "") -> None:
        """An error read back from a checkpoint seen again: from now on it is known by its
        signature, so it can fail attempts and be resolved like any other."""
        if not self._adopted or self.book.current("error", sig.key) is not None:
            return
        fact = self._adopted.pop(" ".join(sig.line.split()), None)
        if fact is None or not fact.live or fact.status != "open":
            return
        old = self._errors.pop(fact.key, None)
        self.book.update(fact, key=sig.key, detail={"line": sig.line, "kind": sig.kind})
        commands = (old.commands if old else set()) | {cmd}
        families = (old.families if old else set()) | {family or cmd}
        self._errors[sig.key] = _ErrorState(old.seen_seq if old else 0, commands, families=families)

    # -- internals: attempts ---------------------------------------------------------------

    def _attempts_since(self, seq: int) -> list[_Attempt]:
        return [a for a in self._attempts if a.seq > seq and not a.undone]

    def _attempt(self, attempt_id: int) -> _Attempt | None:
        return next((a for a in reversed(self._attempts) if a.id == attempt_id), None)

    def _latest_unblamed(self) -> list[_Attempt]:
        for attempt in reversed(self._attempts):
            if not attempt.undone:
                return [] if attempt.user_failed else [attempt]
        return []

    def _latest_unundone(self) -> _Attempt | None:
        return next((a for a in reversed(self._attempts) if not a.undone), None)

    def _attempt_for(self, paths: list[str]) -> _Attempt | None:
        """The latest attempt that touched any of ``paths`` (the latest one when none given)."""
        if not self._attempts:
            return None
        if not paths:
            return self._attempts[-1]
        keys = {normalize_path(p) for p in paths}
        for attempt in reversed(self._attempts):
            if keys & {normalize_path(p) for p in attempt.paths}:
                return attempt
        return None

    def _attempt_by_commit(self, commit: str) -> _Attempt | None:
        if not commit:
            return None
        for attempt in reversed(self._attempts):
            for known, _msg in attempt.commits:
                if known.startswith(commit) or commit.startswith(known):
                    return attempt
        return None

    def _fail(self, attempt: _Attempt, reason: str, turn: int, entry: str | None) -> None:
        if reason not in attempt.reasons:
            attempt.reasons.append(reason)
        if entry and entry not in attempt.entries:
            attempt.entries.append(entry)
        key = f"attempt:{attempt.id}"
        text = _compose("", attempt.describe() + ": " + "; ".join(attempt.reasons))
        detail = {
            "attempt": attempt.id,
            "paths": list(attempt.paths),
            "commits": [list(c) for c in attempt.commits],
            "edit_turn": attempt.turn,
            "reasons": list(attempt.reasons),
            "entries": ([attempt.reply_entry] if attempt.reply_entry else []) + attempt.entries,
            "undone": attempt.undone,
        }
        fact = self.book.current("failed", key)
        if fact is None:
            self.book.add("failed", key, text, turn, entry_id=entry, detail=detail)
        else:
            self.book.update(fact, text=text, detail=detail)

    def _acquit(self, attempt: _Attempt, turn: int) -> None:
        """``attempt`` just resolved an error: withdraw the "did not fix" it was given for some
        other error before its fix showed up; with no reason left it is no failed approach."""
        kept = [r for r in attempt.reasons if not r.startswith(DID_NOT_FIX)]
        if kept == attempt.reasons:
            return
        attempt.reasons = kept
        fact = self.book.current("failed", f"attempt:{attempt.id}")
        if fact is None:
            return
        if not kept:
            attempt.entries = []
            self.book.update(fact, status="superseded")
            return
        text = _compose("", attempt.describe() + ": " + "; ".join(kept))
        self.book.update(fact, text=text, detail={"reasons": list(kept)})

    # -- internals: files ------------------------------------------------------------------

    def _file(self, path: str) -> _FileState:
        key = normalize_path(path)
        state = self._files.get(key)
        if state is None:
            state = self._files[key] = _FileState(_path_key(path))
        return state

    def _file_event(self, path: str, turn: int, op: str) -> None:
        state = self._file(path)
        if state.op == op:
            return
        state.op, state.commit, state.message, state.undone = op, None, None, None
        self._file_fact(state, turn, new_fact=True)

    def _file_fact(
        self, state: _FileState, turn: int, new_fact: bool, extra: dict[str, Any] | None = None
    ) -> None:
        detail = {
            "op": state.op,
            "commit": state.commit,
            "message": state.message,
            "undone_turn": state.undone,
            **(extra or {}),
        }
        detail = {k: v for k, v in detail.items() if v is not None}
        current = self.book.current("file", state.key)
        if new_fact or current is None:
            self.book.add("file", state.key, state.render(), turn, detail=detail)
        else:
            self.book.update(current, text=state.render(), detail=detail)

    # -- internals: decisions --------------------------------------------------------------

    def _decide(
        self, kind: str, key: str, line: str, turn: int, entry: str | None, by: str
    ) -> None:
        if kind == "constraint":
            self.book.add("constraint", key, line, turn, entry_id=entry, detail={"by": by})
            return
        x, y = _choice(key)
        live = self.book.find("decision")
        if by == "assistant" and any(_choice(f.key)[0] == x for f in live):
            return  # agreeing with a decision already recorded in the user's words
        current = self.book.current("decision", key)
        if current is not None and current.text == line:
            return
        fact = self.book.add(
            "decision",
            key,
            line,
            turn,
            entry_id=entry,
            detail={"use": x, "instead_of": y or None, "by": by},
            supersede=False,
        )
        self.supersede_for(fact)

    @_total()
    def supersede_for(self, fact: Fact) -> None:
        """Mark the live facts ``fact`` replaces as superseded (the rules in the module
        docstring): also for a fact merged in from elsewhere (a mid-session /resume)."""
        if fact.kind == "constraint":
            for old in self.book.find("constraint", fact.key):
                if old.id != fact.id:
                    self.book.update(old, status="superseded", superseded_by=fact.id)
            return
        if fact.kind != "decision":
            return
        x, y = _choice(fact.key)
        for old in self.book.find("decision"):
            if old.id == fact.id:
                continue
            ox, oy = _choice(old.key)
            if (ox == x and (y or not oy)) or (y and ox == y) or (y and oy == y and ox != x):
                self.book.update(old, status="superseded", superseded_by=fact.id)

    # -- resume ------------------------------------------------------------------------------

    def _adopt(self, book: FactBook) -> None:
        """Rebuild what can be rebuilt from an existing book (facts read back on resume):
        open errors can still be resolved, files keep their commit."""
        for fact in book:
            if not fact.live:
                continue
            if fact.kind == "error" and fact.status == "open":
                cmd = fact.detail.get("command") or NO_COMMAND
                family = extract.command_family(cmd) or cmd
                self._errors[fact.key] = _ErrorState(0, {cmd}, families={family})
                self._commands.setdefault(cmd, 0)  # its next run can resolve it
                self._families.add(family)
                if not fact.key.startswith(SIGNATURE_KINDS):
                    # a checkpoint keys errors by their text: match them by the error line
                    self._adopted[" ".join(str(fact.detail.get("line") or fact.text).split())] = (
                        fact
                    )
            elif fact.kind == "failed":
                attempt = fact.detail.get("attempt")
                if isinstance(attempt, int):  # new attempts must not reuse its key
                    self._next_attempt = max(self._next_attempt, attempt + 1)
            elif fact.kind == "file" and fact.key:
                state = self._file(fact.key)
                state.key = fact.key
                state.op = fact.detail.get("op")
                state.commit = fact.detail.get("commit")
                state.message = fact.detail.get("message")
                undone = fact.detail.get("undone_turn")
                state.undone = undone if isinstance(undone, int) else None


# --------------------------------------------------------------------------- helpers


def _path_key(path: str) -> str:
    """``.\\src\\app.py`` -> ``src/app.py``: one spelling per file, case kept."""
    key = path.strip().replace("\\", "/")
    while key.startswith("./"):
        key = key[2:]
    return key or path


def _strip_mode(prompt: str) -> str:
    stripped = prompt.lstrip()
    for mode in ("/ask ", "/code ", "/architect ", "/context "):
        if stripped.startswith(mode):
            return stripped[len(mode) :]
    return prompt


def _choice(key: str) -> tuple[str, str]:
    body = key[4:] if key.startswith("use:") else key
    x, _, y = body.partition("|")
    return x, y


def _exit_code(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return None


_TEST_LINE = re.compile(r"^FAILED (\S+)")
_PATHISH = re.compile(r"[/\\]|::|\.\w{1,5}$")
# How test runs are started, before their own arguments: ``python -m pytest``, ``npx jest``, …
_LAUNCHERS = frozenset(
    """python python3 -m uv poetry pipenv hatch run npx pnpm yarn npm bun bunx cargo go dotnet
    mvn gradle pytest py.test jest vitest mocha test tests tox nox unittest""".split()
)
# Options that run a subset of the tests: a failing test missing from such a run was not run
_SELECTORS = re.compile(
    r"^(?:-k|-m|-t|-run|--lf|--last-failed|--sw|--stepwise|--deselect|--grep|--filter|--only|"
    r"--testNamePattern|--testPathPattern|--tests?)(?:=|$)"
)
# Options whose value is the next word (not a test path or a name filter)
_VALUED = frozenset(
    """-p -c -o -n -W -j --maxfail --rootdir --junitxml --junit-xml --tb --color --cov
    --cov-report --timeout --durations --basetemp --confcutdir --reporter --config --workers
    --import-mode --log-level --capture --ignore --ignore-glob""".split()
)


def _test_id(fact: Fact) -> str:
    """The failing test an error fact is about (``tests/test_app.py::test_load``), or ''."""
    if fact.key.startswith("test:"):
        return fact.key[len("test:") :]
    m = _TEST_LINE.match(str(fact.detail.get("line") or fact.text))
    return m.group(1) if m else ""


def _covers(command: str, test_id: str) -> bool:
    """Whether a test run's line runs ``test_id``: no option selecting a subset (``-k``,
    ``--lf``, ``-t``), no name filter, and either no path (the whole suite) or a path that
    holds the test."""
    test_file = re.split(r"::| > | › ", test_id, maxsplit=1)[0].replace("\\", "/")
    words = extract.command_family(command).split(" && ")[-1].split()
    while words and words[0].rsplit("/", 1)[-1] in _LAUNCHERS:
        words = words[1:]
    if any(_SELECTORS.match(w) for w in words):
        return False
    args = [
        w
        for i, w in enumerate(words)
        if not w.startswith("-") and not (i and words[i - 1] in _VALUED)
    ]
    if any(not _PATHISH.search(w) for w in args):
        return False  # a name filter (``cargo test parse``) or an option's value
    for arg in args:
        path = arg.replace("\\", "/").split("::", 1)[0].rstrip("/").removeprefix("./")
        if test_file == path or test_file.startswith(path + "/") or test_file.endswith("/" + path):
            return "::" not in arg or test_id.startswith(arg.removeprefix("./"))
    return not args


def _exit_only(error: ErrorSig) -> bool:
    """Claude Code's "Error: Exit code 1" line alone, which only repeats the exit status."""
    return error.line.startswith("Error: Exit code ")


def _exit_error(cmd: str, code: int, output: str) -> ErrorSig:
    """A failed command whose output has no recognisable error: its last line says most."""
    tail = output[-4096:].strip().rsplit("\n", 1)[-1].strip() if output else ""
    line = f"exit {code}" + (f": {tail}" if tail else "")
    return ErrorSig(f"exit:{cmd}", clip(extract.strip_ansi(line)), "exit")


def _outcome(counts: dict[str, int], errors: list[ErrorSig], code: int | None, found: int) -> str:
    order = ("failed", "errors", "passed", "skipped", "pending", "xfailed", "xpassed")
    parts = [f"{counts[k]} {k}" for k in order if counts.get(k)]
    parts += [
        f"{v} {k}"
        for k, v in counts.items()
        if k not in order and v and k not in ("total", "warnings")
    ]
    if parts:
        text = ", ".join(parts)
        return text + (f" (exit {code})" if code not in (None, 0) and not errors else "")
    if errors:
        n = f"{found}+" if found >= extract.MAX_ERRORS else str(len(errors))
        first = errors[0].line
        return f"{n} error{'s' if len(errors) > 1 else ''}: {first}"
    if code not in (None, 0):
        return f"exit {code}"
    return "ok"


def _fact_entries(fact: Fact) -> Iterable[str]:
    if fact.entry_id:
        yield fact.entry_id
    for entry in fact.detail.get("entries", ()) or ():
        if isinstance(entry, str) and entry:
            yield entry

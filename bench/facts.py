"""Does the fact tracker see every edit and commit Aider made? Measured on real chat histories.

Each history is imported with the bench importer (one reply per event) and replayed through
real Aider coders in gardener mode, so the facts come from Aider's own edit flow, not from
synthetic events. The replay rebuilds what the recorded Aider met: the files each reply applied
hold its SEARCH texts, edits that failed fail again, the fence and edit format are the recorded
ones, and Aider's commit-message request is answered with the recorded message, so it makes
real commits in a temp git repo. Per turn, the tracker's file facts are compared with the
transcript's ``applied`` paths and edit commits (matched by message and count; hashes differ):
precision and recall for edited files and for commits. Aider's own ``Applied edit``/``Commit``
lines in the replay put each miss down to the replay or to the tracker.

    python -m bench.facts [HISTORY.md ...] [--json OUT]

How the replay reproduces the recorded edits: docs/decisions/053-fact-tracker-replay.md.
"""

from __future__ import annotations

import argparse
import contextlib
import io as _io
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import aider_gardener  # noqa: F401  (offline switches before aider/litellm load)
from aider_gardener.integration.keeper import tracker_of

from .replay.format import TURN_EVENTS, Replay, load, save
from .replay.importers.aider_history import EDIT_FAILURE_FIELDS, import_path
from .replay.runner import (
    ALLOWED_COMMANDS,
    CoderDriver,
    ReplayIO,
    StubLLM,
    bench_environment,
    command_name,
)

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("GARDENER_SHARED_DATA", ROOT.parent / "shared" / "data"))
HISTORIES = SHARED / "aider_histories"
MAX_REFLECTIONS = 100  # each one consumes a recorded reply; an empty queue answers "Ok."
CONTINUE = "(replay: the recorded session continues with the next reply)"
NO_MESSAGE = "chore: replayed edit (no commit recorded for this reply)"
EDITED_OPS = ("edited", "created")
EXAMPLES = 25  # misses kept per history in the JSON
USER_CHANGE = "replay: stands in for the user's own uncommitted change"
SEED_MESSAGE = "replay: seed files for the next recorded edit"
APPLIED_LINE = re.compile(r"^Applied edit to (.+?)\s*$")
COMMIT_LINE = re.compile(r"^Commit ([0-9a-f]{7,40}) (.+)$")


def norm_path(path: str) -> str:
    """Paths as one spelling: Windows separators and a leading ``./`` do not make a new file."""
    path = path.strip().replace("\\", "/")
    while path.startswith("./"):
        path = path[2:]
    return path


def norm_message(message: str) -> str:
    return " ".join(str(message).split())


# -- scores --------------------------------------------------------------------------------------


@dataclass
class Score:
    tp: int = 0
    fp: int = 0
    fn: int = 0

    @property
    def precision(self) -> float | None:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else None

    @property
    def recall(self) -> float | None:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else None

    def add(self, other: "Score") -> None:
        self.tp += other.tp
        self.fp += other.fp
        self.fn += other.fn

    def to_dict(self) -> dict[str, Any]:
        return {
            "tp": self.tp,
            "fp": self.fp,
            "fn": self.fn,
            "precision": self.precision,
            "recall": self.recall,
        }


def score_sets(truth: set[str], found: set[str]) -> Score:
    return Score(len(truth & found), len(found - truth), len(truth - found))


def score_lists(truth: list[str], found: list[str]) -> Score:
    """Multisets: two commits with one message are two commits."""
    t, f = Counter(truth), Counter(found)
    tp = sum((t & f).values())
    return Score(tp, sum(f.values()) - tp, sum(t.values()) - tp)


@dataclass
class TurnRecord:
    """What one turn should have produced and what it did."""

    turn: int
    truth_edited: set[str] = field(default_factory=set)
    truth_commits: list[str] = field(default_factory=list)
    fact_edited: set[str] = field(default_factory=set)
    fact_commits: list[tuple[str, str]] = field(default_factory=list)  # (hash, message)
    aider_edited: set[str] = field(default_factory=set)  # Aider's own lines in the replay
    aider_commits: list[tuple[str, str]] = field(default_factory=list)
    unused_edited: set[str] = field(default_factory=set)  # applied by replies never requested
    stale_facts: int = 0  # facts changed in the turn but dated to an earlier one
    skipped: bool = False  # a command the replay does not run


@dataclass
class SessionResult:
    history: str
    name: str
    turns: int = 0
    replies: int = 0
    unused_replies: int = 0
    skipped_commands: int = 0
    seeded_files: int = 0
    user_changes: int = 0  # files given a stand-in user change (see Driver.user_change)
    chat_added: int = 0  # applied files put in the chat before their edit (see before_apply)
    auto_commits: bool = True
    facts_available: bool = True
    excluded_commits: Counter = field(default_factory=Counter)
    records: list[TurnRecord] = field(default_factory=list)
    repo_commits: dict[str, str] = field(default_factory=dict)  # full hash -> subject
    errors: list[str] = field(default_factory=list)
    wall_s: float = 0.0


# -- the replay ----------------------------------------------------------------------------------


def commit_prompt_head() -> str:
    """The part of Aider's commit-message system prompt before its language slot."""
    from aider import prompts

    return prompts.commit_system.split("{language_instruction}")[0].strip()


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def _git(root: Path, *args: str, check: bool = True) -> str:
    done = subprocess.run(
        ["git", *args], cwd=root, capture_output=True, text=True, check=check, encoding="utf-8"
    )
    return done.stdout


def _has_lines(content: str, text: str) -> bool:
    """Aider matches a SEARCH text as whole lines."""
    text = text if text.endswith("\n") else text + "\n"
    return ("\n" + text) in ("\n" + content)


def block_text(text: str) -> str:
    """A SEARCH text as one spelling: the transcript quotes it with trailing blanks dropped."""
    return "\n".join(line.rstrip() for line in str(text).splitlines()).strip("\n")


def reply_fence(content: str) -> tuple[str, str] | None:
    """The fence a reply's edits use when it is not Aider's default: Aider picks another one
    when a file in the chat holds triple backticks, and the replay's seeded files may not."""
    from aider.coders.base_coder import all_fences

    lines = content.splitlines()
    for fence in all_fences[1:]:
        if any(line.startswith(fence[0]) for line in lines):
            return fence
    return None


OLD_FILENAME_GAP = re.compile(r"(?m)^(\S+)\n[ \t]*\n((?:```|````)[^\n]*\n<{5,9} SEARCH)")


def as_current_aider(content: str) -> str:
    """Aider before 0.5x found a block's file name up to three lines above the fence, blank
    lines included; today's parser wants it right above. The edit applied then, so the replay
    closes that gap (and changes nothing else)."""
    return OLD_FILENAME_GAP.sub(r"\1\n\2", content)


def code_format(replay: Replay) -> str:
    """The edit format ``/code`` and ``/chat-mode code`` use: the recorded one when it edits,
    else the one the recorded replies are written in."""
    fmt = replay.meta.get("edit_format") or ""
    if fmt in ("diff", "whole", "udiff", "diff-fenced", "patch"):
        return fmt
    replies = "\n".join(e["content"] for e in replay.events if e["type"] == "assistant")
    return "diff" if "<<<<<<< SEARCH" in replies else "whole"


class FactsStub(StubLLM):
    """The runner's stub, plus: commit-message requests get the recorded message, and every
    reply handed out is announced to the driver first (so its files are seeded)."""

    def __init__(self, real: Any, model: str, window: int, driver: "Driver"):
        super().__init__(real, model, window)
        self.driver = driver
        self.head = commit_prompt_head()

    def __call__(self, **kwargs: Any) -> Any:
        messages = kwargs.get("messages") or []
        first = _text(messages[0].get("content")) if messages else ""
        if self.head and self.head in first:
            kwargs["mock_response"] = self.driver.next_commit_message()
            return self.real(**kwargs)
        before = len(self.queue)
        response = super().__call__(**kwargs)
        if len(self.queue) < before:
            self.driver.reply_handed_out()
        return response


class Driver(CoderDriver):
    """One replay through real coders: the coder (replaced on every SwitchCoder), the stub, the
    scripted ``run_cmd``, seeding and the per-turn records."""

    def __init__(self, replay: Replay, root: Path, store: Path, gardener: bool, result: Any):
        from aider.coders import Coder
        from aider.models import Model

        self.replay, self.root, self.result = replay, root, result
        meta = replay.meta
        self.edit_format = meta.get("edit_format") or None
        self.window = int(meta["max_input_tokens"])
        self.io = ReplayIO.make(root)
        self.record: TurnRecord | None = None  # the hooked io prints while the coder is made
        self._hook_io()
        replies = [e for e in replay.events if e["type"] == "assistant"]
        applied = any(e.get("applied") for e in replies)
        commits = any(
            c.get("kind") in (None, "failed") for e in replies for c in e.get("commits", [])
        )
        result.auto_commits = commits or not applied
        model = Model(meta["model"])
        for m in [m for m in (model, model.weak_model, model.editor_model) if m is not None]:
            m.info = dict(m.info or {}, max_input_tokens=self.window)
        model.max_chat_history_tokens = min(max(self.window / 16, 1024), 8192)
        # /code and the architect's editor answer in the format the transcript's replies use
        model.edit_format = code_format(replay)
        model.editor_edit_format = "editor-diff" if model.edit_format == "diff" else "editor-whole"
        self.commands = None
        if gardener:
            from aider_gardener.integration.commands import GardenCommands

            args = argparse.Namespace(
                gardener_mode="rag",
                gardener_store=str(store),
                gardener_scope="project",
                gardener_vectors=False,
            )
            self.commands = GardenCommands(self.io, None, args=args)
        self.coder = Coder.create(
            model,
            self.edit_format,
            self.io,
            commands=self.commands,
            stream=False,
            map_tokens=0,
            auto_commits=result.auto_commits,
            dirty_commits=False,
            auto_lint=False,
            suggest_shell_commands=False,
            detect_urls=False,
            chat_language="English",
            fnames=[],
        )
        self.stub: FactsStub | None = None
        self.scripted: tuple[int, str] | None = None
        self.replies: list[dict] = []
        self.handed = 0
        self.current: dict | None = None
        self.commit_messages: list[str] = []
        self.signing_fails = False
        self.current_files: list[str] = []  # the current reply's applied files, as spelt
        self.failed_searches: set[str] = set()  # SEARCH texts that failed to match (block_text)

    # -- Aider's side ------------------------------------------------------------------------

    def _hook_io(self) -> None:
        io = self.io
        confirm, output = io.confirm_ask, io.tool_output

        def confirm_ask(question: Any, *args: Any, **kwargs: Any) -> bool:
            if str(question).startswith(("Create new file", "Allow edits to file")):
                io.num_user_asks += 1
                subject = kwargs.get("subject") or (args[1] if len(args) > 1 else "")
                return self.may_edit(str(subject or ""))
            return confirm(question, *args, **kwargs)

        def tool_output(*messages: Any, log_only: bool = False, bold: bool = False) -> None:
            for message in messages:
                self.saw(str(message))
            return output(*messages, log_only=log_only, bold=bold)

        io.confirm_ask = confirm_ask
        io.tool_output = tool_output

    def saw(self, line: str) -> None:
        if self.record is None:
            return
        line = line.strip()
        found = APPLIED_LINE.match(line)
        if found:
            self.record.aider_edited.add(norm_path(found.group(1)))
            return
        found = COMMIT_LINE.match(line)
        if found and not self.signing_fails:
            self.record.aider_commits.append((found.group(1), found.group(2).strip()))

    def may_edit(self, path: str) -> bool:
        return norm_path(path) in {norm_path(p) for p in self.current_files}

    def edit_files(self, reply: dict) -> list[str]:
        """The files a reply's edits changed in the recorded session: the ``Applied edit``
        ones; and when some blocks failed and Aider said the others applied (it prints no
        ``Applied edit`` then, but writes and commits them), the files of the others."""
        files = list(reply.get("applied", []))
        if reply.get("partly_applied"):
            failed = {block_text(b.get("search", "")) for b in reply.get("failed_blocks", [])}
            content = as_current_aider(reply["content"])
            for path, search in self.search_blocks(content, files):
                if block_text(search) not in failed and path not in files:
                    files.append(path)
        return files

    def pending(self) -> bool:
        return self.stub is not None and bool(self.stub.queue)

    # -- the recorded replies ----------------------------------------------------------------

    def start_turn(self, replies: list[dict], record: TurnRecord) -> None:
        self.replies, self.handed, self.current, self.record = replies, 0, None, record
        self.commit_messages = []
        assert self.stub is not None
        self.stub.queue = [as_current_aider(r["content"]) for r in replies]

    def reply_handed_out(self) -> None:
        """The stub just gave Aider the next recorded reply: seed its files, queue its commit
        messages, and make its commit fail if the transcript's did."""
        if self.handed >= len(self.replies):
            return
        self.current = self.replies[self.handed]
        self.handed += 1
        self.failed_searches = {
            block_text(b.get("search", "")) for b in self.current.get("failed_blocks", [])
        }
        self.seed(self.current)
        commits = [c for c in self.current.get("commits", []) if c.get("kind") in (None, "failed")]
        self.commit_messages = [c["message"] or NO_MESSAGE for c in commits]
        self.set_signing_fails(bool(commits) and commits[0].get("kind") == "failed")

    def before_apply(self, coder: Any) -> None:
        """Right before Aider applies the current reply: the fence the reply was written for,
        and the files the transcript applied in the chat. Aider resolves a block's file name
        against the files in the chat (a near miss is taken for one of them), so an applied
        file missing from the chat (added in the recorded session in a way the history does
        not show, e.g. by ``--watch-files``) could send the edit to another file. They are
        added the way Aider adds a file the user allows it to edit, without a command."""
        fence = reply_fence(self.current["content"]) if self.current else None
        if fence is not None:
            coder.fence = fence
        for path in self.current_files:
            full = coder.abs_root_path(path)
            if os.path.isfile(full) and full not in coder.abs_fnames:
                coder.abs_fnames.add(full)
                self.result.chat_added += 1

    def fails_to_match(self, search: str) -> bool:
        """A SEARCH block the recorded Aider said failed to match fails here too: the replay's
        files are stand-ins (seeded, or left by earlier replies) and may hold lines the real
        file did not, and a block that matched here but not there would add an edit and a
        commit the session never had."""
        return bool(self.failed_searches) and block_text(search) in self.failed_searches

    def next_commit_message(self) -> str:
        return self.commit_messages.pop(0) if self.commit_messages else NO_MESSAGE

    def set_signing_fails(self, fail: bool) -> None:
        if fail == self.signing_fails:
            return
        if fail:
            _git(self.root, "config", "commit.gpgsign", "true")
            _git(self.root, "config", "gpg.program", "false")
        else:
            _git(self.root, "config", "--unset", "commit.gpgsign", check=False)
            _git(self.root, "config", "--unset", "gpg.program", check=False)
        self.signing_fails = fail

    def search_blocks(self, content: str, applied: list[str]) -> list[tuple[str, str]]:
        """(path, SEARCH text) of a reply's edit blocks, parsed by Aider's own parser for the
        format the reply is written in; file names resolve to the applied files first, as
        they did when the files were in the recorded chat."""
        blocks: list[tuple[str, str]] = []
        if re.search(r"^<{5,9} SEARCH>?\s*$", content, re.MULTILINE):
            from aider.coders.editblock_coder import find_original_update_blocks

            fence = reply_fence(content) or ("```", "```")
            valid = list(applied) + [norm_path(p) for p in applied]
            with contextlib.suppress(Exception):  # the chat's files are only a hint
                valid += self.coder.get_inchat_relative_files()
            try:
                for block in find_original_update_blocks(content, fence, valid):
                    if block[0] is not None:
                        blocks.append((block[0], block[1]))
            except ValueError:
                pass  # a malformed block: the ones before it still count, as in Aider
        elif self.edit_format == "udiff" and "@@" in content:
            from aider.coders.udiff_coder import find_diffs, hunk_to_before_after

            with contextlib.suppress(Exception):
                for path, hunk in find_diffs(content):
                    blocks.append((path, hunk_to_before_after(hunk)[0]))
        return blocks

    def seed(self, reply: dict) -> None:
        self.current_files = self.edit_files(reply)
        applied = {norm_path(p) for p in self.current_files}
        if not applied:
            return
        changed: list[str] = []
        content = as_current_aider(reply["content"])
        for path, search in self.search_blocks(content, self.current_files):
            if norm_path(path) not in applied:
                continue
            self.current_files.append(path)  # the spelling Aider will use
            if not search.strip() or self.fails_to_match(search):
                continue
            full = self.root / path
            try:
                current = full.read_text(encoding="utf-8") if full.is_file() else ""
            except (OSError, UnicodeDecodeError):
                continue
            if _has_lines(current, search):
                continue
            if current and not current.endswith("\n"):
                current += "\n"
            full.parent.mkdir(parents=True, exist_ok=True)
            full.write_text(current + search + ("" if search.endswith("\n") else "\n"), "utf-8")
            changed.append(path)
        if changed:
            self.result.seeded_files += len(set(changed))
            _git(self.root, "add", "--", *sorted(set(changed)))
            _git(self.root, "commit", "-q", "--no-verify", "-m", SEED_MESSAGE)
        if any(c.get("kind") == "dirty" for c in reply.get("commits", [])):
            self.user_change()

    def user_change(self) -> None:
        """The transcript's dirty commit says the user had changed the files since Aider's
        last commit, and Aider committed that change before the edit. Without a change of
        the kind, a reply that rewrites a file as it was would leave nothing to commit. One
        line stands in for it, committed by the replay (the tracker never sees dirty
        commits, and the truth leaves them out)."""
        changed = []
        for path in dict.fromkeys(self.current_files):
            full = self.root / path
            if full.is_file():
                with contextlib.suppress(OSError):
                    with full.open("a", encoding="utf-8") as f:
                        f.write(USER_CHANGE + "\n")
                    changed.append(path)
        if changed:
            self.result.user_changes += len(changed)
            _git(self.root, "add", "--", *changed)
            _git(self.root, "commit", "-q", "--no-verify", "-m", USER_CHANGE)

    # -- the tracker's side ------------------------------------------------------------------

    def gardener_turn(self) -> int | None:
        if self.commands is None:
            return None
        return int(getattr(self.commands.gardener, "turn", 0))

    def fact_book(self) -> Any:
        if self.commands is None:
            return None
        return tracker_of(self.commands.gardener).book

    def close(self) -> None:
        """Close the gardener, and wait for Aider's summarizer thread (plain mode) while the
        stub still answers it."""
        if self.commands is not None:
            with contextlib.suppress(Exception):
                self.commands.gardener.close()
        thread = getattr(self.coder, "summarizer_thread", None)
        if thread is not None:
            thread.join(timeout=60)


def file_facts(book: Any) -> dict[int, tuple[str, str, str, str, int]]:
    """id -> (path, op, commit, message, turn) of every file fact, superseded ones too."""
    out = {}
    for fact in book or ():
        if fact.kind != "file":
            continue
        d = fact.detail or {}
        out[fact.id] = (
            norm_path(fact.key),
            str(d.get("op", "")),
            str(d.get("commit") or ""),
            str(d.get("message") or ""),
            int(fact.turn),
        )
    return out


def facts_of_turn(
    before: dict[int, tuple], after: dict[int, tuple], floor: int | None = None
) -> tuple[set[str], list[tuple[str, str]], int]:
    """Files edited and commits recorded during a turn: the file facts it added or changed;
    and how many of those still carry a turn before the gardener's first turn of it
    (``floor``), i.e. an old fact updated in place for a new event."""
    known = {v[2] for v in before.values() if v[2]}
    edited: set[str] = set()
    commits: dict[str, str] = {}
    stale = 0
    for fid, value in after.items():
        if before.get(fid) == value:
            continue
        path, op, commit, message, turn = value
        if op in EDITED_OPS:
            edited.add(path)
        if commit and commit not in known:
            commits.setdefault(commit, message)
        if floor is not None and turn <= floor and (op in EDITED_OPS or commit):
            stale += 1
    return edited, sorted(commits.items()), stale


def same_message(fact: str, real: str) -> bool:
    """A fact's commit message is the commit's, or the commit's clipped to one short line."""
    fact, real = norm_message(fact), norm_message(real)
    if fact == real:
        return True
    return fact.endswith("…") and len(fact) > 1 and real.startswith(fact[:-1].rstrip())


@contextlib.contextmanager
def _coders(gardener: bool, driver_ref: list) -> Iterator[None]:
    """Gardened (or plain) coders, reflections allowed, and a turn whose transcript has more
    replies than Aider asked for asks again."""
    from aider.coders import editblock_coder
    from aider.coders.base_coder import Coder

    from aider_gardener.integration.registry import gardened, restore_coders

    original, original_apply = Coder.send_message, Coder.apply_updates
    original_replace = editblock_coder.do_replace

    def do_replace(fname, content, before_text, after_text, fence=None):  # noqa: ANN001
        driver = driver_ref[0] if driver_ref else None
        if driver is not None and driver.current is not None and before_text.strip():
            if driver.fails_to_match(before_text):
                return None
        return original_replace(fname, content, before_text, after_text, fence)

    saved = Coder.max_reflections

    def send_message(self, inp):  # noqa: ANN001
        yield from original(self, inp)
        driver = driver_ref[0] if driver_ref else None
        if driver is not None and driver.pending() and not self.reflected_message:
            self.reflected_message = CONTINUE

    def apply_updates(self):  # noqa: ANN001
        driver = driver_ref[0] if driver_ref else None
        if driver is not None and driver.current is not None:
            driver.before_apply(self)
        return original_apply(self)

    Coder.send_message, Coder.apply_updates = send_message, apply_updates
    editblock_coder.do_replace = do_replace
    Coder.max_reflections = MAX_REFLECTIONS
    try:
        if gardener:
            with gardened():
                yield
        else:
            restore_coders()
            yield
    finally:
        Coder.send_message, Coder.apply_updates = original, original_apply
        editblock_coder.do_replace = original_replace
        Coder.max_reflections = saved


def run_session(replay: Replay, history: str = "", *, gardener: bool = True) -> SessionResult:
    """Replay one session and record, per turn, the transcript's truth, Aider's own edit and
    commit lines, and the tracker's facts. Must run inside ``bench_environment()``."""
    import aider.commands as aider_commands
    import litellm
    from aider.utils import GitTemporaryDirectory

    result = SessionResult(history or replay.name, replay.name)
    start = time.perf_counter()
    cwd = os.getcwd()
    driver_ref: list[Driver] = []
    out = _io.StringIO()
    with contextlib.ExitStack() as stack:
        root = Path(stack.enter_context(GitTemporaryDirectory()))
        store = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="facts-store-")))
        stack.enter_context(contextlib.redirect_stdout(out))
        stack.enter_context(_coders(gardener, driver_ref))
        driver = Driver(replay, root, store / "store", gardener, result)
        driver_ref.append(driver)
        stub = FactsStub(litellm.completion, replay.meta["model"], driver.window, driver)
        driver.stub = stub
        stack.callback(setattr, litellm, "completion", litellm.completion)
        stack.callback(setattr, aider_commands, "run_cmd", aider_commands.run_cmd)
        stack.callback(driver.close)  # first: Aider's threads finish while the stub answers
        litellm.completion = stub
        aider_commands.run_cmd = driver.run_cmd
        _replay_events(replay, driver, result)
        driver.close()
        log = _git(root, "log", "--all", "--format=%H %s", check=False)
        result.repo_commits = dict(
            line.split(" ", 1) if " " in line else (line, "") for line in log.splitlines()
        )
    os.chdir(cwd)
    result.wall_s = time.perf_counter() - start
    return result


def _replay_events(replay: Replay, driver: Driver, result: SessionResult) -> None:
    events = replay.events
    i, turn = 0, 0
    while i < len(events):
        event = events[i]
        kind = event["type"]
        i += 1
        if kind in ("add", "drop"):
            driver.file_event(event)
            continue
        if kind not in TURN_EVENTS:
            continue
        turn += 1
        replies = []
        while i < len(events) and events[i]["type"] == "assistant":
            replies.append(events[i])
            i += 1
        record = TurnRecord(turn)
        for reply in replies:
            # the truth: the Applied edit lines, and in a partly applied reply (Aider says "the
            # other N blocks were applied successfully", prints no Applied line, commits them)
            # the files of the blocks that did not fail
            record.truth_edited |= {norm_path(p) for p in driver.edit_files(reply)}
            for commit in reply.get("commits", []):
                if commit.get("kind") is None:
                    record.truth_commits.append(norm_message(commit["message"]))
                else:
                    result.excluded_commits[commit["kind"]] += 1
        result.records.append(record)
        result.replies += len(replies)
        if kind == "run":
            text = f"/{event.get('via', 'run')} {event['command']}"
            driver.scripted = (int(event.get("exit_code", 0)), event["output"])
        else:
            text = event["content"]
        name = command_name(text)
        if name is not None and name not in ALLOWED_COMMANDS:
            result.skipped_commands += 1
            record.skipped = True
            record.unused_edited = set(record.truth_edited)
            result.unused_replies += len(replies)
            continue
        book = _safe_book(driver, result)
        before = file_facts(book)
        floor = driver.gardener_turn()
        driver.start_turn(replies, record)
        try:
            driver.line(text)
        except (Exception, SystemExit) as err:  # noqa: BLE001 - one turn, not the replay
            result.errors.append(f"turn {turn}: {type(err).__name__}: {err}")
        unused = driver.replies[driver.handed :]
        result.unused_replies += len(unused)
        for reply in unused:
            record.unused_edited |= {norm_path(p) for p in reply.get("applied", [])}
        driver.record = None
        driver.set_signing_fails(False)
        if driver.stub is not None:
            driver.stub.queue = []
        book = _safe_book(driver, result)
        if book is not None:
            record.fact_edited, record.fact_commits, record.stale_facts = facts_of_turn(
                before, file_facts(book), floor
            )
    result.turns = turn


def _safe_book(driver: Driver, result: SessionResult) -> Any:
    if not result.facts_available:
        return None
    try:
        book = driver.fact_book()
    except Exception as err:  # noqa: BLE001 - the tracker is not wired: measure the rest
        result.facts_available = False
        result.errors.append(f"no fact tracker: {type(err).__name__}: {err}")
        return None
    if book is None:
        result.facts_available = False
    return book


# -- scoring -------------------------------------------------------------------------------------


@dataclass
class Scores:
    """Facts vs transcript (the must-hold), Aider's replay vs transcript (replay fidelity) and
    facts vs Aider's replay (the tracker alone), for edited files and commits."""

    edited: Score = field(default_factory=Score)
    commits: Score = field(default_factory=Score)
    replay_edited: Score = field(default_factory=Score)
    replay_commits: Score = field(default_factory=Score)
    tracker_edited: Score = field(default_factory=Score)
    tracker_commits: Score = field(default_factory=Score)
    bad_hashes: int = 0
    clipped_messages: int = 0  # commit facts whose message is the commit's, clipped
    stale_facts: int = 0
    misses: Counter = field(default_factory=Counter)
    examples: list[dict] = field(default_factory=list)
    replay_misses: Counter = field(default_factory=Counter)
    replay_examples: list[dict] = field(default_factory=list)

    def add(self, other: "Scores") -> None:
        for name in (
            "edited",
            "commits",
            "replay_edited",
            "replay_commits",
            "tracker_edited",
            "tracker_commits",
        ):
            getattr(self, name).add(getattr(other, name))
        self.bad_hashes += other.bad_hashes
        self.clipped_messages += other.clipped_messages
        self.stale_facts += other.stale_facts
        self.misses.update(other.misses)
        self.replay_misses.update(other.replay_misses)


def _real(commit: str, repo: dict[str, str]) -> str | None:
    """The subject of the temp repo's commit ``commit`` names (None: no such commit)."""
    if len(commit) < 7:
        return None
    for full, subject in repo.items():
        if full.startswith(commit):
            return subject
    return None


def score_session(result: SessionResult) -> Scores:
    s = Scores()

    def miss(kind: str, turn: int, what: str) -> None:
        s.misses[kind] += 1
        if len(s.examples) < EXAMPLES:
            s.examples.append({"session": result.name, "turn": turn, "kind": kind, "what": what})

    def replay_miss(kind: str, turn: int, what: str) -> None:
        s.replay_misses[kind] += 1
        if len(s.replay_examples) < EXAMPLES:
            s.replay_examples.append(
                {"session": result.name, "turn": turn, "kind": kind, "what": what}
            )

    for r in result.records:
        # a fact's commit counts only if the temp repo has it, with that message
        fact_msgs = []
        s.stale_facts += r.stale_facts
        for commit, message in r.fact_commits:
            subject = _real(commit, result.repo_commits)
            if subject is None or not same_message(message, subject):
                s.bad_hashes += 1
                miss("commit fact names no such commit in the repo", r.turn, commit)
                fact_msgs.append(f"\0bad:{commit}")
            else:
                s.clipped_messages += norm_message(message) != norm_message(subject)
                fact_msgs.append(norm_message(subject))
        aider_msgs = [norm_message(m) for _, m in r.aider_commits]
        s.edited.add(score_sets(r.truth_edited, r.fact_edited))
        s.commits.add(score_lists(r.truth_commits, fact_msgs))
        s.replay_edited.add(score_sets(r.truth_edited, r.aider_edited))
        s.replay_commits.add(score_lists(r.truth_commits, aider_msgs))
        s.tracker_edited.add(score_sets(r.aider_edited, r.fact_edited))
        s.tracker_commits.add(score_lists(aider_msgs, fact_msgs))
        for path in sorted(r.truth_edited - r.fact_edited):
            if r.skipped:
                why = "edit missed: its turn is a command the replay skips"
            elif path in r.unused_edited and path not in r.aider_edited:
                why = "edit missed: Aider never asked for the reply that made it"
            elif path not in r.aider_edited:
                why = "edit missed: Aider did not apply it in the replay"
            else:
                why = "edit missed: Aider applied it, no fact"
            miss(why, r.turn, path)
        for path in sorted(r.fact_edited - r.truth_edited):
            if path in r.aider_edited:
                why = "extra edit: Aider applied it in the replay, not in the transcript"
            else:
                why = "extra edit: a fact without an applied edit"
            miss(why, r.turn, path)
        for path in sorted(r.aider_edited - r.truth_edited):
            replay_miss("Aider applied an edit the transcript did not", r.turn, path)
        for path in sorted(r.truth_edited - r.aider_edited - r.unused_edited):
            replay_miss("Aider did not apply an edit the transcript applied", r.turn, path)
        for message in (Counter(aider_msgs) - Counter(r.truth_commits)).elements():
            replay_miss("Aider made a commit the transcript did not", r.turn, message)
        for message in (Counter(r.truth_commits) - Counter(aider_msgs)).elements():
            replay_miss("Aider did not make a commit the transcript made", r.turn, message)
        t, f, a = Counter(r.truth_commits), Counter(fact_msgs), Counter(aider_msgs)
        for message in (t - f).elements():
            why = (
                "commit missed: Aider committed it, no fact"
                if a[message]
                else "commit missed: no such commit in the replay"
            )
            miss(why, r.turn, message)
        for message in (f - t).elements():
            if message.startswith("\0bad:"):
                continue
            why = (
                "extra commit: Aider made it in the replay, not in the transcript"
                if a[message]
                else "extra commit: a fact without a commit"
            )
            miss(why, r.turn, message)
    return s


# -- the command ---------------------------------------------------------------------------------


def import_history(path: Path, folder: Path) -> tuple[list[Replay], Counter]:
    """The importer's replays of one history, written to ``folder`` and read back (so what is
    measured is what the replay files say): one reply per event, every session with a reply;
    and the count of Aider's lines that follow no reply."""
    unattributed: Counter = Counter()
    replays = import_path(
        path, min_turns=1, split_replies=True, unattributed=unattributed, edit_failures=True
    )
    out = []
    for replay in replays:
        # the edit failures are not replay-format fields: saved without, put back after
        kept = [{k: e.pop(k) for k in EDIT_FAILURE_FIELDS if k in e} for e in replay.events]
        loaded = load(save(replay, folder / f"{replay.name}.jsonl"))
        for event, extra in zip(loaded.events, kept):
            event.update(extra)
        out.append(loaded)
    return out, unattributed


def measure(
    paths: list[Path],
    *,
    gardener: bool = True,
    max_sessions: int | None = None,
    progress: Any = None,
) -> dict[str, Any]:
    """Import and replay every history; the report as a dict (also what ``--json`` writes)."""
    histories: list[dict[str, Any]] = []
    overall = Scores()
    with bench_environment(), tempfile.TemporaryDirectory(prefix="facts-import-") as tmp:
        for path in paths:
            folder = Path(tmp) / path.stem
            replays, unattributed = import_history(path, folder)
            if max_sessions is not None:
                replays = replays[:max_sessions]
            total = Scores()
            excluded: Counter = Counter()
            info = Counter()
            examples: list[dict] = []
            replay_examples: list[dict] = []
            errors: list[str] = []
            wall = 0.0
            facts_available = True
            for replay in replays:
                if progress is not None:
                    progress(f"{path.name}: {replay.name} ({replay.turns()} turns)")
                result = run_session(replay, path.name, gardener=gardener)
                scores = score_session(result)
                total.add(scores)
                examples += scores.examples[: max(0, EXAMPLES - len(examples))]
                replay_examples += scores.replay_examples[: max(0, EXAMPLES - len(replay_examples))]
                excluded.update(result.excluded_commits)
                info.update(
                    sessions=1,
                    turns=result.turns,
                    replies=result.replies,
                    unused_replies=result.unused_replies,
                    skipped_commands=result.skipped_commands,
                    seeded_files=result.seeded_files,
                    files_put_in_chat=result.chat_added,
                    user_changes_stood_in=result.user_changes,
                    sessions_without_auto_commits=int(not result.auto_commits),
                )
                errors += [f"{result.name}: {e}" for e in result.errors][:5]
                wall += result.wall_s
                facts_available &= result.facts_available
            overall.add(total)
            histories.append(
                {
                    "history": path.name,
                    **dict(info),
                    "facts_available": facts_available and gardener,
                    "edited": total.edited.to_dict(),
                    "commits": total.commits.to_dict(),
                    "replay_vs_transcript": {
                        "edited": total.replay_edited.to_dict(),
                        "commits": total.replay_commits.to_dict(),
                    },
                    "facts_vs_replay": {
                        "edited": total.tracker_edited.to_dict(),
                        "commits": total.tracker_commits.to_dict(),
                    },
                    "commit_facts_not_in_repo": total.bad_hashes,
                    "commit_facts_with_clipped_message": total.clipped_messages,
                    "facts_changed_but_dated_earlier": total.stale_facts,
                    "commits_left_out_of_truth": dict(excluded),
                    "truth_lines_following_no_reply": unattributed.get("no reply", 0),
                    "truth_lines_in_sessions_without_reply": unattributed.get("skipped", 0),
                    "misses": dict(total.misses.most_common()),
                    "examples": examples,
                    "replay_divergence": dict(total.replay_misses.most_common()),
                    "replay_examples": replay_examples,
                    "errors": errors[:20],
                    "wall_s": round(wall, 1),
                }
            )
    return {
        "goal": 0.95,
        "mode": "gardener" if gardener else "plain aider (facts: none)",
        "histories": histories,
        "overall": {
            "edited": overall.edited.to_dict(),
            "commits": overall.commits.to_dict(),
            "replay_vs_transcript": {
                "edited": overall.replay_edited.to_dict(),
                "commits": overall.replay_commits.to_dict(),
            },
            "facts_vs_replay": {
                "edited": overall.tracker_edited.to_dict(),
                "commits": overall.tracker_commits.to_dict(),
            },
            "commit_facts_not_in_repo": overall.bad_hashes,
            "commit_facts_with_clipped_message": overall.clipped_messages,
            "facts_changed_but_dated_earlier": overall.stale_facts,
            "misses": dict(overall.misses.most_common()),
            "replay_divergence": dict(overall.replay_misses.most_common()),
        },
    }


def _fmt(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def print_report(report: dict[str, Any], file: Any = None) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(file=file or sys.stdout, width=160)
    table = Table(title=f"Fact tracker vs transcript ({report['mode']}; goal ≥ {report['goal']})")
    for col in ("history", "sessions", "turns", "edits", "P", "R", "commits", "P", "R"):
        table.add_column(col, justify="left" if col == "history" else "right")
    table.add_column("replay P/R edits · commits", justify="right")

    def row(name: str, h: dict[str, Any]) -> None:
        e, c = h["edited"], h["commits"]
        re_, rc = h["replay_vs_transcript"]["edited"], h["replay_vs_transcript"]["commits"]
        table.add_row(
            name,
            str(h.get("sessions", "")),
            str(h.get("turns", "")),
            str(e["tp"] + e["fn"]),
            _fmt(e["precision"]),
            _fmt(e["recall"]),
            str(c["tp"] + c["fn"]),
            _fmt(c["precision"]),
            _fmt(c["recall"]),
            f"{_fmt(re_['precision'])}/{_fmt(re_['recall'])} · "
            f"{_fmt(rc['precision'])}/{_fmt(rc['recall'])}",
        )

    for h in report["histories"]:
        row(h["history"].removesuffix(".md"), h)
    totals = dict(report["overall"])
    totals["sessions"] = sum(h.get("sessions", 0) for h in report["histories"])
    totals["turns"] = sum(h.get("turns", 0) for h in report["histories"])
    table.add_section()
    row("overall", totals)
    console.print(table)
    o = report["overall"]
    console.print(
        f"Commit facts naming no commit of the repo: {o['commit_facts_not_in_repo']}; "
        f"with the message clipped: {o['commit_facts_with_clipped_message']}; "
        f"file facts changed in a turn but dated to an earlier one: "
        f"{o['facts_changed_but_dated_earlier']}"
    )
    for title, key in (
        ("Fact misses by cause:", "misses"),
        (
            "Replay divergence (Aider's own lines in the replay vs the transcript):",
            "replay_divergence",
        ),
    ):
        counts = report["overall"][key]
        if counts:
            console.print(title)
            for kind, n in counts.items():
                console.print(f"  {n:5d}  {kind}")


def default_paths() -> list[Path]:
    return sorted(HISTORIES.glob("*.md")) if HISTORIES.is_dir() else []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.facts", description=__doc__.split("\n")[0]
    )
    parser.add_argument("histories", nargs="*", help="chat history files (default: shared data)")
    parser.add_argument("--json", help="write the report as JSON here")
    parser.add_argument("--sessions", type=int, help="replay only the first N sessions of each")
    parser.add_argument(
        "--plain",
        action="store_true",
        help="plain Aider, no gardener: measures only how faithfully the replay redoes the edits",
    )
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    paths = [Path(p) for p in args.histories] or default_paths()
    if not paths:
        print(f"bench.facts: no chat histories found (looked in {HISTORIES}); skipping")
        return 0
    missing = [p for p in paths if not p.is_file()]
    if missing:
        print(f"bench.facts: not found: {', '.join(map(str, missing))}", file=sys.stderr)
        return 2

    def progress(text: str) -> None:
        if not args.quiet:
            print(f"  replaying {text} …", file=sys.stderr, flush=True)

    report = measure(paths, gardener=not args.plain, max_sessions=args.sessions, progress=progress)
    print_report(report)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
        print(f"JSON: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

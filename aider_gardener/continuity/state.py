"""The session-state block: the compact prefix placed before history on every turn.

It sits before the history so a provider's prompt cache keeps it, which only works if the text
is byte-identical as long as the facts are: it is a pure function of the live facts (no clock,
no dict-order, no set iteration), and it is re-rendered only when ``FactBook.version`` moves.
It must also fit a fixed budget (``--gardener-state-tokens``) whatever the session did, so when
the facts do not fit, whole lines are dropped in a fixed order of value (see ``_RANK``), and the
block says how many of each kind were left out so the user knows to ``/recall`` them.

How to get details back depends on who reads the block (``RecallWording``): in Aider the user's
``/recall ID``; in Claude Code and other MCP clients the model's own ``expand``/``recall`` tools of
the gardener MCP server. A checkpoint always writes Aider's form (its lines are parsed back).
"Recall ids" lists the commands whose output the store kept (text and entry id); open errors and
failed approaches carry their own ids inline.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from ..tokens import count_tokens
from .facts import Fact, FactBook


@dataclass(frozen=True)
class RecallWording:
    """How the block says to get details back: ``details`` in the header, ``by_id`` before an
    entry id in a line, ``by_query`` in a "… N more" line."""

    details: str
    by_id: str
    by_query: str

    @property
    def header(self) -> str:
        return f"Session state kept by aider-gardener (details: {self.details}):"


# Aider's chat commands (the user's); the default, and the only form a checkpoint writes.
AIDER_RECALL = RecallWording("/recall ID", "/recall", "/recall <query>")
# The gardener MCP server's tools, which the model calls itself (Claude Code, other MCP clients).
TOOLS_RECALL = RecallWording(
    "expand ID, or recall QUERY, with the gardener's tools", "expand", "recall <query>"
)

# The one header of the block: the model sees it once (the integration sends the block as it is).
HEADER = AIDER_RECALL.header

# Section titles, in the order they are shown.
GOAL = "Goal"
DECISIONS = "Constraints and decisions"
FILES = "Files"
ERRORS = "Open errors"
FIXED = "Fixed errors"
FAILED = "Failed approaches — do not repeat"
RECALL = "Recall ids"
ORDER = (GOAL, DECISIONS, FILES, ERRORS, FIXED, FAILED, RECALL)

# Drop precedence when over budget: lowest rank goes first; within a rank the oldest first.
# Commands are recoverable from the store; files and decisions are visible in the repo and the
# user's own messages; failed approaches and open errors are what the model would otherwise
# repeat or forget, so they go last. The goal is never dropped (only clipped).
# Fixed errors (what was wrong and which edit fixed it: the artifact trail) go right after commands.
_RANK = {
    "command": 0,
    "fixed": 1,
    "file": 2,
    "decision": 3,
    "constraint": 4,
    "failed": 5,
    "error": 6,
}
_NOUN = {
    "command": ("command", "commands"),
    "file": ("file", "files"),
    "decision": ("decision", "decisions"),
    "constraint": ("constraint", "constraints"),
    "failed": ("failed approach", "failed approaches"),
    "error": ("open error", "open errors"),
    "fixed": ("fixed error", "fixed errors"),
    "fact": ("fact", "facts"),
}
_SECTION_OF = {
    "command": RECALL,
    "file": FILES,
    "decision": DECISIONS,
    "constraint": DECISIONS,
    "failed": FAILED,
    "error": ERRORS,
    "fixed": FIXED,
}
_ELLIPSIS = "…"


_CONTROLS = dict.fromkeys([*range(0, 9), *range(11, 32), *range(127, 160)])


def one_line(text: str | None) -> str:
    """Facts are meant to be one line, but a stray newline would break the block's layout (and
    a checkpoint's bullets), and a control character (NUL above all) would make a checkpoint
    read as binary, so line breaks and tabs become spaces and other controls go."""
    if not text:
        return ""
    if text.isprintable():
        return text.strip()
    return " ".join(text.translate(_CONTROLS).replace("\t", " ").splitlines()).strip()


def _token(value: object) -> str:
    """An op, hash or entry id as one unbroken word, so a rendered line splits back into it."""
    return re.sub(r'[\s()"`]+', "", one_line(str(value or "")))


def order_key(fact: Fact) -> tuple[int, int]:
    return (fact.turn, fact.id)


def file_line(fact: Fact, last_commit: tuple[str, str] | None = None) -> str:
    """``path: state (hash "message")``; the path alone when the fact carries no op. The op
    and hash are kept to the characters they are made of, so a checkpoint bullet can always be
    split back into them."""
    path = one_line(fact.key) or one_line(fact.text)
    op = re.sub(r"[^\w-]+", "-", one_line(str(fact.detail.get("op") or "")))
    if not path or not op:
        return path
    line = f"{path}: {op}"
    commit = _token(fact.detail.get("commit"))
    message = one_line(str(fact.detail.get("message") or ""))
    if not commit and last_commit:
        commit, message = last_commit
    if commit:
        line += f' ({commit} "{message}")' if message else f" ({commit})"
    return line


def error_line(fact: Fact, recall: str = AIDER_RECALL.by_id) -> str:
    """The error with the command that produced it and its recall id, so the model (or the
    user) can get the full output back without it sitting in the history."""
    text = one_line(fact.text)
    # a backtick inside the command would make the line ambiguous to read back
    command = one_line(str(fact.detail.get("command") or "")).replace("`", "'")
    entry = _token(fact.entry_id)
    if command and entry:
        return f"{text} (from `{command}`; {recall} {entry})"
    if command:
        return f"{text} (from `{command}`)"
    if entry:
        return f"{text} ({recall} {entry})"
    return text


def recall_suffix(fact: Fact, recall: str = AIDER_RECALL.by_id) -> str:
    entry = _token(fact.entry_id)
    return f" ({recall} {entry})" if entry else ""


def current_goal(book: FactBook) -> Fact | None:
    goals = [f for f in book.find("goal") if one_line(f.text)]
    return max(goals, key=order_key) if goals else None


def _last_commits(book: FactBook) -> dict[str, tuple[str, str]]:
    """The last commit of each path, superseded facts included: a file that was edited and then
    re-added still shows the commit that last changed it. An undone commit changed nothing."""
    commits: dict[str, tuple[str, str]] = {}
    for fact in sorted(book.find("file", live=False), key=order_key):
        if fact.detail.get("op") == "undone":
            continue
        commit = _token(fact.detail.get("commit"))
        if commit:
            commits[fact.key] = (commit, one_line(str(fact.detail.get("message") or "")))
    return commits


@dataclass
class _Item:
    kind: str
    rank: int
    age: tuple[int, ...]
    sort: tuple
    line: str
    tokens: int = 0
    group: str | None = None  # shown inline: one line per group, items joined by ", "
    source: str | None = None  # an open error's command and id, shared by its output's errors
    same: str | None = None  # its line after an error of the same output, over budget


# Over budget, files are listed compactly (``_compact_files``): one line per group, paths under
# their common folder, most recent first, so every edited file can stay at a few tokens each.
EDITED_GROUP = "edited, latest first"
SEEN_GROUP = "read or added, latest first"
_FILE_MARK = {"created": " (new)", "undone": " (undone)", "dropped": " (dropped)"}
COMMAND_MAX = 48  # characters of an open error's command in the block (its id recalls it)
ERROR_MAX = 200  # characters of an open error's text in the block (a fact's LINE_MAX)


def _file_value(fact: Fact) -> int:
    """Dropped files go first, then files read or added (visible in the chat or the repo),
    then the edited ones (what the session changed)."""
    op = fact.detail.get("op")
    return 0 if op == "dropped" else 2 if op in ("edited", "created", "undone") else 1


def _short_command(fact: Fact) -> Fact:
    """The fact with its command clipped to ``COMMAND_MAX`` and its text to ``ERROR_MAX`` for
    the block: a long pipeline repeated on every error of one output costs more than the
    errors, and an error's type, start of message and location come first."""
    command = one_line(str(fact.detail.get("command") or ""))
    text = one_line(fact.text)
    if len(command) <= COMMAND_MAX and len(text) <= ERROR_MAX:
        return fact
    if len(command) > COMMAND_MAX:
        command = command[: COMMAND_MAX - 1].rstrip() + _ELLIPSIS
    if len(text) > ERROR_MAX:
        text = text[: ERROR_MAX - 1].rstrip() + _ELLIPSIS
    detail = {**fact.detail, "command": command}
    return Fact(fact.id, fact.kind, fact.key, text, fact.turn, fact.entry_id, detail=detail)


def _bare_exit(fact: Fact) -> bool:
    """An error that only says a command failed ("exit 2", Claude Code's "Error: Exit code 2"):
    its command and id say as much, so it goes before the files the session edited."""
    return bool(_BARE_EXIT.match(one_line(fact.text)))


_BARE_EXIT = re.compile(r"(?:exit \d+|Error: Exit code \d+)$")


def _items(book: FactBook, wording: RecallWording) -> list[_Item]:
    commits = _last_commits(book)
    items = []
    for fact in book.find():
        if fact.kind == "file":
            line = file_line(fact, commits.get(fact.key))
            # dropped files are the least useful of the files, then the oldest
            rank_age: tuple[int, ...] = (_file_value(fact), *order_key(fact))
            sort: tuple = (line, order_key(fact))
        elif fact.kind == "error":
            if fact.status == "resolved":
                by = one_line(str(fact.detail.get("resolved_by") or ""))
                line = one_line(fact.text) + (f" (fixed by {by})" if by else "")
                items.append(
                    _Item("fixed", _RANK["fixed"], order_key(fact), order_key(fact), "- " + line)
                )
                continue
            if fact.status != "open":
                continue
            short = _short_command(fact)
            line = error_line(short, wording.by_id)
            rank_age, sort = order_key(fact), order_key(fact)
            if _bare_exit(fact):  # ranked with the files read, before the edited ones
                items.append(_Item("error", _RANK["file"], (1, *rank_age), sort, "- " + line))
                continue
            text = one_line(short.text)
            if text and line != text:
                same = f"- {text} (same output)"
                source = line[len(text) :]
                items.append(
                    _Item(
                        "error",
                        _RANK["error"],
                        rank_age,
                        sort,
                        "- " + line,
                        0,
                        source=source,
                        same=same,
                    )
                )
                continue
        elif fact.kind == "command":
            if not _token(fact.entry_id):
                continue  # without an id there is nothing to recall; errors show its effect
            line = f"{one_line(fact.text)}: {wording.by_id} {_token(fact.entry_id)}"
            rank_age, sort = order_key(fact), order_key(fact)
        elif fact.kind in ("decision", "constraint", "failed"):
            failed = fact.kind == "failed"
            line = one_line(fact.text) + (recall_suffix(fact, wording.by_id) if failed else "")
            # constraints before decisions in the shared section: rules outrank choices
            sort = (0 if fact.kind == "constraint" else 1, *order_key(fact))
            rank_age = order_key(fact)
        else:
            continue
        if not line.strip():
            continue
        items.append(_Item(fact.kind, _RANK[fact.kind], rank_age, sort, "- " + line))
    return items


def _more_line(kind: str, n: int, wording: RecallWording = AIDER_RECALL) -> str:
    return f"- {_ELLIPSIS} {n} more {_NOUN[kind][0 if n == 1 else 1]}: {wording.by_query}"


def _assemble(
    goal: str | None,
    items: list[_Item],
    dropped: dict[str, int],
    wording: RecallWording = AIDER_RECALL,
    share: bool = False,
) -> list[str]:
    """The block's lines; with ``share`` (over budget) an open error right after one from the
    same output says "(same output)" instead of repeating its command and id."""
    lines = [wording.header]
    if goal:
        lines.append(f"{GOAL}: {goal}")
    by_section: dict[str, list[_Item]] = {}
    for item in items:
        by_section.setdefault(_SECTION_OF[item.kind], []).append(item)
    for section in ORDER[1:]:
        shown = sorted(by_section.get(section, []), key=lambda i: i.sort)
        left = [(k, n) for k, n in dropped.items() if n and _SECTION_OF[k] == section]
        if not shown and not left:
            continue
        lines.append(f"{section}:")
        source = None
        for item in shown:
            if item.group is None:
                shared = share and item.source is not None and item.source == source
                lines.append(item.same if shared and item.same else item.line)
                source = item.source
        for group in (EDITED_GROUP, SEEN_GROUP):
            if not any(i.group == group for i in shown):
                continue
            lines.append(_group_line(group, [i.line for i in shown if i.group == group]))
        for kind, n in sorted(left, key=lambda kn: _RANK[kn[0]]):
            lines.append(_more_line(kind, n, wording))
    return lines


def _folder(paths: list[str]) -> str:
    """The longest folder (ending in "/") every path is under; "" when none is shared."""
    first = min(paths)
    last = max(paths)
    n = 0
    while n < min(len(first), len(last)) and first[n] == last[n]:
        n += 1
    return first[:n].rpartition("/")[0] + "/" if "/" in first[:n] else ""


_ABSOLUTE = re.compile(r"^(?:/|~|[A-Za-z]:/)")


def _clusters(paths: list[str]) -> tuple[list[str], dict[str, list[str]]]:
    """(paths shown whole, absolute paths by the folder they share): a relative path is short
    and usable as it is; absolute ones (outside the project) are grouped by their first three
    parts, in order, each group shown under its common folder."""
    by_root: dict[str, list[str]] = {}
    for p in paths:
        if _ABSOLUTE.match(p):
            by_root.setdefault("/".join(p.split("/")[:3]), []).append(p)
    whole = [p for p in paths if not _ABSOLUTE.match(p) or len(by_root[_root(p)]) == 1]
    shared: dict[str, list[str]] = {}
    for members in by_root.values():
        if len(members) > 1:
            folder = _folder([m.partition(" (")[0] for m in members])
            shared.setdefault(folder, []).extend(members)
    return whole, shared


def _root(path: str) -> str:
    return "/".join(path.split("/")[:3])


def _group_line(group: str, paths: list[str]) -> str:
    whole, shared = _clusters(paths)
    parts = [", ".join(whole)] if whole else []
    for folder, members in shared.items():
        parts.append(f"in {folder}: " + ", ".join(m[len(folder) :] for m in members))
    return f"- {group}: " + "; ".join(parts)


def _compact_files(items: list[_Item], model: str) -> list[_Item]:
    """``items`` with every file as a path in its group's line (``EDITED_GROUP``,
    ``SEEN_GROUP``), costed at the tokens of its path as shown there."""
    groups: dict[str, list[_Item]] = {}
    out = []
    for item in items:
        if item.kind != "file":
            out.append(item)
            continue
        path, _, op = item.line[2:].partition(": ")
        op = op.split(" ", 1)[0]
        group = EDITED_GROUP if item.age[0] == 2 else SEEN_GROUP
        mark = _FILE_MARK.get(op, "")
        # most recent first: the sort key is the negated age
        recent_first = tuple(-x for x in item.age[1:])
        compact = _Item("file", item.rank, item.age, recent_first, path + mark, group=group)
        groups.setdefault(group, []).append(compact)
        out.append(compact)
    for group, members in groups.items():
        whole, shared = _clusters([m.line for m in members])
        shown = {p: p for p in whole}
        for folder, paths in shared.items():
            shown.update({p: p[len(folder) :] for p in paths})
        for m in members:  # less the newline ``_tokens`` counts: they share one line
            m.tokens = max(1, _tokens(", " + shown.get(m.line, m.line), model) - 1)
        members[0].tokens += _tokens(f"- {group}: ", model)
        members[0].tokens += sum(_tokens(f"; in {folder}: ", model) for folder in shared)
    return out


@lru_cache(maxsize=16384)
def _tokens(line: str, model: str) -> int:
    """Tokens of one line with its newline; per-line counts add up to the block's count within
    about a token per line, and are cached, so a cut can be costed without re-encoding."""
    return count_tokens(line + "\n", model)


def _clip_goal(goal: str, budget: int, model: str) -> str | None:
    """The goal is never dropped while anything else could be, but a pasted essay of a request
    must not break the bound: keep the longest prefix that fits."""
    if _tokens(f"{GOAL}: {goal}", model) <= budget:
        return goal
    lo, hi = 0, len(goal)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if _tokens(f"{GOAL}: {goal[:mid]}{_ELLIPSIS}", model) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return goal[:lo].rstrip() + _ELLIPSIS if lo else None


def render_state(
    book: FactBook, *, max_tokens: int, model: str, recall: RecallWording = AIDER_RECALL
) -> str:
    """The state block for ``book`` within ``max_tokens``; "" when there is nothing to say or
    not even the header fits. ``recall``: how its reader gets details back (see the module
    docstring)."""
    goal_fact = current_goal(book)
    goal = one_line(goal_fact.text) if goal_fact else None
    items = _items(book, recall)
    if not goal and not items:
        return ""
    header_tokens = _tokens(recall.header, model)
    if max_tokens <= header_tokens:
        return ""
    if goal:
        goal = _clip_goal(goal, max_tokens - header_tokens, model)
        if not goal and not items:
            return ""

    for item in items:
        item.tokens = _tokens(item.line, model)
    fixed = header_tokens + (_tokens(f"{GOAL}: {goal}", model) if goal else 0)
    title_tokens = {s: _tokens(f"{s}:", model) for s in ORDER[1:]}
    shown = {s: 0 for s in ORDER[1:]}
    for item in items:
        shown[_SECTION_OF[item.kind]] += 1
    kept_tokens = sum(i.tokens for i in items)
    estimate = fixed + kept_tokens + sum(title_tokens[s] for s, n in shown.items() if n)
    if estimate - len(items) - 8 <= max_tokens:  # it may fit: count exactly
        text = "\n".join(_assemble(goal, items, {}, recall))
        if count_tokens(text, model) <= max_tokens:
            return text

    # Over budget: files compactly, then drop the least valuable lines until the per-line
    # estimate fits, then confirm with an exact count.
    items = _compact_files(items, model)
    source = None
    for item in sorted(items, key=lambda i: (_SECTION_OF[i.kind], i.sort)):
        if item.same and item.source == source:
            item.tokens = _tokens(item.same, model)
        source = item.source
    kept_tokens = sum(i.tokens for i in items)
    if fixed + kept_tokens - 8 <= max_tokens:
        text = "\n".join(_assemble(goal, items, {}, recall, share=True))
        if count_tokens(text, model) <= max_tokens:
            return text
    drop_order = sorted(range(len(items)), key=lambda n: (items[n].rank, items[n].age))
    gone: set[int] = set()
    dropped: dict[str, int] = {}
    more_tokens: dict[str, int] = {}
    noted: set[str] = set()  # sections with a "… N more" line
    for n in drop_order:
        item = items[n]
        section = _SECTION_OF[item.kind]
        gone.add(n)
        kept_tokens -= item.tokens
        shown[section] -= 1
        noted.add(section)
        dropped[item.kind] = dropped.get(item.kind, 0) + 1
        more_tokens[item.kind] = _tokens(_more_line(item.kind, dropped[item.kind], recall), model)
        titles = sum(title_tokens[s] for s in ORDER[1:] if shown[s] or s in noted)
        if fixed + kept_tokens + titles + sum(more_tokens.values()) > max_tokens:
            continue
        kept = [i for k, i in enumerate(items) if k not in gone]
        text = "\n".join(_assemble(goal, kept, dropped, recall, share=True))
        if count_tokens(text, model) <= max_tokens:
            return text
    # Even one note per kind does not fit: the header, the goal and a single note.
    lines = _assemble(goal, [], {}, recall)
    text = "\n".join([*lines, _more_line("fact", len(items), recall)])
    if count_tokens(text, model) <= max_tokens:
        return text
    text = "\n".join(lines)
    return text if goal and count_tokens(text, model) <= max_tokens else ""

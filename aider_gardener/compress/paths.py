"""Path lists (Glob, ``ls``, ``find``, ``git ls-files``, ``rg -l``, ``git status``) kept usable.

In a path list every line is the fact, so no name is ever folded into a template (the log
compressor would turn 300 similar files into one ``[×100] docs/area_<n>/…`` line naming none of
them). The paths are grouped by directory (a directory line, then its names indented), in the
order first seen, while they fit a token budget; the rest is counted on one line naming the
stored id to expand. The tree is used only when it costs fewer tokens than the flat list. ``floor``
names are kept whatever the budget: the hook passes what Claude Code itself would have shown.
``git status`` (long or ``-s``) is a path list too; each path keeps git's letter before its name,
explained by one legend line.

Detection and rendering are linear: a set test per line, one token count per kept line.

Decision record: docs/decisions/017-path-lists.md
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass

from ..tokens import count_tokens
from ..types import Compressed, CompressOptions
from .base import clip_line

PATH_TOKENS = 2000  # the budget of a path list's summary (the Claude Code hook passes its own)
MIN_PATHS = 10  # fewer lines are cheap as they are
PATH_SHARE = 0.9  # of the non-blank lines: the rest (a "find: …" warning, a count) is kept apart
MAX_OTHERS = 12  # non-path lines shown before the tree
MAX_PATH_CHARS = 1024
MARKER_RE = re.compile(r"^\[paths: [0-9,]+ in [0-9,]+ director(?:y|ies)[^\n]*\]$", re.M)
_HEAD_CHARS = 20_000
_RESERVE = 80  # tokens for the closing lines
_CHARS = frozenset(string.ascii_letters + string.digits + "_-./\\~@+,=%#[](){}!&'$^")


_STATUS_WORDS = {
    "modified": "M",
    "new file": "A",
    "deleted": "D",
    "renamed": "R",
    "copied": "C",
    "typechange": "T",
    "both modified": "U",
    "both added": "U",
    "both deleted": "U",
    "added by us": "U",
    "added by them": "U",
    "deleted by us": "U",
    "deleted by them": "U",
}
_LONG_STATUS = re.compile(r"^\t(" + "|".join(map(re.escape, _STATUS_WORDS)) + r"):\s+(\S.*)$")
_SHORT_STATUS = re.compile(r"^([ MADRCTU?!])([ MADRCTU?!]) (\S.*)$")
_SECTIONS = {
    "Changes to be committed:": "+",
    "Changes not staged for commit:": "",
    "Untracked files:": "?",
    "Unmerged paths:": "",
}
LEGEND = (
    "[git status: M modified, A added, D deleted, R renamed, U unmerged, ?? untracked; + staged]"
)


@dataclass
class PathList:
    paths: list[str]
    others: list[str]  # the non-blank lines that are not paths, in order
    labels: list[tuple[str, str]] | None = None  # per path: git's status letter, a rename's source


def is_path(line: str) -> bool:
    """One file or directory name per line, as ``ls``/``find``/Glob print them: no whitespace,
    no ``:`` (a ``grep`` hit, a log line) except a Windows drive, at least one letter."""
    if not line or len(line) > MAX_PATH_CHARS:
        return False
    body = line[2:] if len(line) > 2 and line[1] == ":" and line[2] in "\\/" else line
    if line.isascii():
        if not set(body) <= _CHARS:
            return False
    elif any(not (c in _CHARS or c.isalnum()) for c in body):
        return False
    return any(c.isalpha() for c in body)


def _pathy(line: str) -> bool:
    """Names a place, not only a word: a separator or a file extension."""
    if "/" in line or "\\" in line:
        return True
    dot = line.rfind(".")
    return 0 < dot < len(line) - 1 and line[dot + 1 :].isalnum()


def path_list(text: str) -> PathList | None:
    """The paths of ``text`` when it is a path list (at least ``MIN_PATHS`` of them, nearly every
    non-blank line one, most with a separator or an extension); else None."""
    if MARKER_RE.search(text):
        return None
    if len(text) > _HEAD_CHARS and _scan(text[:_HEAD_CHARS].rpartition("\n")[0]) is None:
        return None  # a long log fails on its first lines: do not split all of it
    return _scan(text)


def _status(line: str, section: str) -> tuple[str, str, str] | None:
    """(path, git's letter(s), the source of a rename) of one ``git status`` line, else None."""
    m = _LONG_STATUS.match(line)
    if m:
        mark = _STATUS_WORDS[m.group(1)] + ("+" if section == "+" else "")
        path = m.group(2)
    elif section == "?" and line.startswith("\t") and is_path(line[1:]):
        return line[1:], "??", ""
    else:
        m = _SHORT_STATUS.match(line)
        if not m or m.group(1) + m.group(2) == "  ":
            return None
        x, y = m.group(1), m.group(2)
        mark = "??" if x + y == "??" else (x + "+" if x != " " else "") + (y if y != " " else "")
        path = m.group(3)
    old, arrow, new = path.partition(" -> ")
    path, source = (new, old) if arrow else (path, "")
    if not is_path(path) or (source and not is_path(source)):
        return None
    return path, mark, source


def _scan(text: str) -> PathList | None:
    paths: list[str] = []
    others: list[str] = []
    labels: list[tuple[str, str]] = []
    pathy = 0
    section = ""
    for raw in text.split("\n"):
        line = raw.rstrip("\r")
        if not line.strip():
            continue
        section = _SECTIONS.get(line, section)
        found = (line, "", "") if is_path(line) else _status(line, section)
        if found is None:
            others.append(line)
        else:
            path, mark, source = found
            paths.append(path)
            labels.append((mark, source))
            pathy += _pathy(path)
        if len(others) > (1 - PATH_SHARE) * max(len(paths) + len(others), MIN_PATHS * 10):
            return None
    total = len(paths) + len(others)
    if len(paths) < MIN_PATHS or len(paths) < PATH_SHARE * total or pathy < 0.6 * len(paths):
        return None
    if not any(mark for mark, _ in labels):
        return PathList(paths, others)
    return PathList(paths, [LEGEND, *others], labels)


def split_path(path: str) -> tuple[str, str]:
    """(directory with its trailing separator, name); a trailing separator stays on the name."""
    trail = path[-1] if path[-1] in "/\\" and len(path) > 1 else ""
    core = path[:-1] if trail else path
    cut = max(core.rfind("/"), core.rfind("\\"))
    if cut < 0:
        return "", path
    return core[: cut + 1], core[cut + 1 :] + trail


def render(
    found: PathList,
    budget: int = PATH_TOKENS,
    entry_id: str | None = None,
    model: str = "gpt-4o",
    floor: int = 0,
    max_chars: int | None = None,
) -> str:
    """The paths as a tree (or flat list, whichever keeps more names, then costs less) within
    ``budget`` tokens and ``max_chars`` characters, the first ``floor`` names whatever the token
    budget, then the count of the rest, the id to expand and a ``[paths: …]`` marker line."""
    others = [clip_line(x, 300) for x in found.others[:MAX_OTHERS]]
    if len(found.others) > MAX_OTHERS:
        others.append(f"… {len(found.others) - MAX_OTHERS:,} more lines that are not paths")
    spare = budget - _RESERVE - sum(count_tokens(x, model) + 1 for x in others)
    room = (max_chars if max_chars is not None else 10**12) - 400 - sum(len(x) + 1 for x in others)
    split, flat = _labelled(found)
    dirs = {d for d, _ in split}
    tree_k = _fill(split, flat, spare, room, floor, model, tree=True)
    flat_k = _fill(split, flat, spare, room, floor, model, tree=False) if len(dirs) > 1 else tree_k
    tree = len(dirs) > 1 and (tree_k > flat_k or tree_k == flat_k and _cheaper(split, flat, tree_k))
    k = tree_k if tree else flat_k
    text = _lines(flat, others, split, dirs, k, tree, entry_id)
    while k > floor:  # the closing lines cost more than reserved: fewer names, not over budget
        over = count_tokens(text, model) - budget
        if over <= 0:
            break
        k = max(floor, k - max(1, over // 8))
        text = _lines(flat, others, split, dirs, k, tree, entry_id)
    return text


def _labelled(found: PathList) -> tuple[list[tuple[str, str]], list[str]]:
    """Each path as (directory, name as shown in a tree) and as a flat line: with its git status
    letter before the name and a rename's source after it."""
    split, flat = [], []
    for i, path in enumerate(found.paths):
        d, name = split_path(path)
        mark, source = found.labels[i] if found.labels else ("", "")
        head = f"{mark} " if mark else ""
        tail = f" (from {source})" if source else ""
        split.append((d, head + name + tail))
        flat.append(head + path + tail)
    return split, flat


def _lines(flat, others, split, dirs, k: int, tree: bool, entry_id: str | None) -> str:
    n = len(split)
    lines = list(others)
    if tree:
        lines += _tree_lines(split, k)
    else:
        lines += flat[:k]
    if k < n:
        left: dict[str, int] = {}
        for d, _ in split[k:]:
            left[d] = left.get(d, 0) + 1
        where = ", ".join(f"{d or './'} ({c:,})" for d, c in list(left.items())[:8])
        if len(left) > 8:
            where += f", … {len(left) - 8:,} more directories"
        handle = f" (id={entry_id}: expand it for the whole list)" if entry_id else ""
        lines.append(clip_line(f"… {n - k:,} more paths{handle}, in {where}", 600))
    shape = "grouped by directory" if tree else "as listed"
    plural = "directory" if len(dirs) == 1 else "directories"
    lines.append(f"[paths: {n:,} in {len(dirs):,} {plural}, {k:,} shown {shape}]")
    return "\n".join(lines)


def _fill(split, flat, spare: int, room: int, floor: int, model: str, tree: bool) -> int:
    """How many paths, in order, fit: each its line, a tree's directory line once."""
    seen: set[str] = set()
    for i, (d, name) in enumerate(split):
        line = f"  {name}" if tree else flat[i]
        cost, width = count_tokens(line, model) + 1, len(line) + 1
        if tree and d not in seen:
            cost += count_tokens(d or "./", model) + 1
            width += len(d or "./") + 12
        if width > room or (cost > spare and i >= floor):
            return i
        seen.add(d)
        spare -= cost
        room -= width
    return len(split)


def _cheaper(split, flat, k: int) -> bool:
    return count_tokens("\n".join(_tree_lines(split, k))) < count_tokens("\n".join(flat[:k]))


def _tree_lines(split, k: int) -> list[str]:
    groups: dict[str, list[str]] = {}
    totals: dict[str, int] = {}
    for i, (d, name) in enumerate(split):
        totals[d] = totals.get(d, 0) + 1
        if i < k:
            groups.setdefault(d, []).append(name)
    out = []
    for d, names in groups.items():
        part = "" if len(names) == totals[d] else f" ({len(names):,} of {totals[d]:,})"
        out.append(f"{d or './'}{part}")
        out += [f"  {name}" for name in names]
    return out


def compress_paths(
    text: str, opts: CompressOptions, budget: int = PATH_TOKENS
) -> Compressed | None:
    """A path list's tree within ``budget`` tokens; None when ``text`` is not a path list."""
    found = path_list(text)
    if found is None:
        return None
    out = render(found, budget, opts.entry_id, opts.model)
    counts = {"paths": len(found.paths), "lines": text.count("\n") + 1}
    if len(out) >= len(text) or count_tokens(out, opts.model) >= count_tokens(text, opts.model):
        return Compressed(text, counts)
    return Compressed(out, counts)

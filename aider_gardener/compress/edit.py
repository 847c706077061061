"""Edit compressor: an applied edit becomes one line per file, the file holds the real text.

Once Aider has applied a SEARCH/REPLACE block, a whole-file rewrite or a unified diff, the edited
file is the source of truth; the block only repeats old and new code. What the conversation still
needs is that the file changed, by how much, and which names the change touched::

    edited aider/main.py: +4 -2 lines (id=k3j2…); replaced: guessed_wrong_repo

Counts are diff counts (``difflib``), not block sizes. Names come from definitions on either side
(else the identifiers new to or gone from the changed lines), found with regexes rather than
tree-sitter because blocks are fragments of files that grammars parse poorly. The parser follows
Aider's own rules (``editblock_coder``) but never raises: an unterminated block is summarised as
far as it goes and marked ``incomplete``. Anything that is not an edit passes through unchanged.

Decision record: docs/decisions/014-edit-summaries.md
"""

from __future__ import annotations

import bisect
import difflib
import keyword
import re
from dataclasses import dataclass, field

from ..types import Compressed, CompressOptions

MAX_NAMES = 6
MAX_LOOSE_NAMES = 4  # identifiers that are not definitions say less; show fewer
DIFF_EXACT_LINES = 2000  # above this per side, difflib's autojunk heuristic keeps it linear-ish

_HEAD = re.compile(r"^<{5,9} SEARCH>?\s*$")
_DIVIDER = re.compile(r"^={5,9}\s*$")
_UPDATED = re.compile(r"^>{5,9} REPLACE\s*$")
_FENCE = re.compile(r"^(?P<fence>`{3,}|~{3,})\s*(?P<info>.*?)\s*$")
_NOMATCH_PATH = re.compile(r"SEARCH block failed to exactly match lines in (?P<path>\S+)")
_DIFF_GIT = re.compile(r"^diff --git (?:a/)?(?P<a>\S+) (?:b/)?(?P<b>\S+)\s*$")
_DIFF_META = re.compile(
    r"^(?:index [0-9a-f]+\.\.[0-9a-f]+|(?:new|deleted) file mode|old mode|new mode|"
    r"similarity index|rename from|rename to|Binary files)"
)
_OLD = re.compile(r"^--- (?P<path>\S.*?)\s*$")
_NEW = re.compile(r"^\+\+\+ (?P<path>\S.*?)\s*$")
_HUNK_LINE = re.compile(r"^(?:[ +\-\\]|@@)")
_PATCH_BEGIN = re.compile(r"^\*\*\* Begin Patch\s*$")
_PATCH_END = re.compile(r"^\*\*\* End Patch\s*$")
_PATCH_FILE = re.compile(r"^\*\*\* (?P<action>Update|Add|Delete) File: (?P<path>\S.*?)\s*$")
_SUMMARY = re.compile(r"^(?:edited|created|deleted|wrote|failed edit) \S")

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_COMMENT = re.compile(r"(?:#|//|--).*$")
_IDENT = re.compile(r"[A-Za-z_$][\w$]*")

_CONTAINERS = "class|struct|enum|trait|union|interface|contract|library|module|impl|namespace"
_MODIFIERS = (
    r"(?:(?:export|default|public|private|protected|internal|static|final|abstract|override|"
    r"virtual|async|synchronized|native|inline|extern|sealed|readonly|declare|pub(?:\([\w:]+\))?|"
    r"unsafe|const|open|data|suspend|partial)\s+)*"
)
# a method or C-family function: ``int foo(...)`` / ``async foo() {`` (a bare call has neither
# a return type nor a brace, and is not a definition)
_METHOD_DEF = re.compile(
    rf"^{_MODIFIERS}(?:(?P<type>[\w<>\[\],.?*&:]+)\s+)?(?P<name>[A-Za-z_$][\w$]*)\s*"
    r"(?:<[^>]*>)?\([^;]*\)\s*(?::\s*[^{;=]+)?(?:throws [\w., ]+)?(?P<brace>\{)?\s*$"
)
_VAR_DEF = re.compile(
    rf"^{_MODIFIERS}(?:const|let|var|val)\s+(?P<name>[A-Za-z_$][\w$]*)\s*(?::[^=]*)?="
)
# (pattern, is_container): matched against a stripped line, first hit wins
_DEFS: list[tuple[re.Pattern[str], bool]] = [
    (re.compile(r"^(?:async\s+)?def\s+(?P<name>[A-Za-z_]\w*)"), False),
    (
        re.compile(
            rf"^{_MODIFIERS}impl(?:<[^>]*>)?\s+(?:[\w:<>]+\s+for\s+)?(?P<name>[A-Za-z_]\w*)"
        ),
        True,
    ),
    (re.compile(rf"^{_MODIFIERS}(?:{_CONTAINERS})\s+(?P<name>[A-Za-z_$][\w$]*)"), True),
    (re.compile(rf"^{_MODIFIERS}function\s*\*?\s*(?P<name>[A-Za-z_$][\w$]*)"), False),
    (re.compile(r"^func\s+(?:\([^)]*\)\s*)?(?P<name>[A-Za-z_]\w*)"), False),
    (
        re.compile(rf"^{_MODIFIERS}(?:fn|fun|sub|proc|modifier|event)\s+(?P<name>[A-Za-z_]\w*)"),
        False,
    ),
    (re.compile(rf"^{_MODIFIERS}(?:type|typedef)\s+(?P<name>[A-Za-z_$][\w$]*)"), False),
    (_VAR_DEF, False),
    (_METHOD_DEF, False),
]
_NOT_NAMES = frozenset(
    list(keyword.kwlist)
    + (
        "if else elif for while switch case catch try finally do return new throw await yield "
        "function delete typeof instanceof in of this self super true false null undefined nil "
        "None True False void int str bool float string char long double byte short boolean "
        "var let const def class import from export default public private protected static "
        "async print echo println printf fmt len range make append require assert sizeof"
    ).split()
)
# files whose words are not code names: no identifier guessing for them
_PROSE_EXTS = frozenset(
    ".md .markdown .rst .txt .adoc .org .html .htm .xml .svg .css .scss .sass .less .csv".split()
)
_COMMENT_LINE = re.compile(r"^\s*(?:\*|/\*|#|//|--|<!--|\"\"\"|\'\'\')")


@dataclass
class _FileEdit:
    path: str
    added: int = 0
    removed: int = 0
    created: bool = False
    deleted: bool = False
    whole: bool = False
    incomplete: bool = False
    failed: bool = False  # quoted back by Aider because it did not apply
    blocks: int = 0
    old: list[list[str]] = field(default_factory=list)
    new: list[list[str]] = field(default_factory=list)


@dataclass
class _Span:
    start: int
    end: int  # exclusive
    paths: list[str]


def compress_edit(text: str, opts: CompressOptions) -> Compressed:
    result, parser = _one_pass(text, opts)
    if parser is None:
        return Compressed(text, {"lines": len(text.splitlines()), "files": 0, "blocks": 0})
    counts = {
        "lines": len(text.splitlines()),
        "files": len(parser.files),
        "blocks": sum(f.blocks for f in parser.files.values()),
        "added": sum(f.added for f in parser.files.values()),
        "removed": sum(f.removed for f in parser.files.values()),
    }
    # Malformed input (stray fences and markers) can leave a fence that only pairs up once the
    # edit between has become one line; repeating until nothing changes keeps the output a
    # fixed point, so compressing it again is a no-op.
    for _ in range(3):
        again, more = _one_pass(result, opts)
        if more is None or again == result:
            break
        result = again
    if len(result) >= len(text):
        return Compressed(text, counts)
    return Compressed(result, counts)


def _one_pass(text: str, opts: CompressOptions) -> tuple[str, _Parser | None]:
    lines = text.split("\n")
    parser = _Parser(lines, opts.source.path)
    parser.run()
    if not parser.spans:
        return text, None
    result = "\n".join(_assemble(lines, parser.spans, parser.files, opts.entry_id))
    if len(result) >= len(text):
        return text, None
    return result, parser


# --- parsing --------------------------------------------------------------------------------


def _as_path(line: str) -> str | None:
    """A file name on a line of its own, the way Aider accepts it (also inside a fence opener)."""
    s = line.strip()
    m = _FENCE.match(s)
    if m:
        s = m.group("info").split()[-1] if m.group("info") else ""
        if "." not in s and "/" not in s:
            return None
    prev = None
    while prev != s:
        prev = s
        s = s.rstrip(":").lstrip("#").strip().strip("`*").strip()
    if not s or s == "..." or len(s) > 250 or any(c.isspace() for c in s):
        return None
    if s[0] in "<>=-+@|([{" or ("." not in s and "/" not in s):
        return None
    if not re.search(r"[A-Za-z]", s) or "://" in s:
        return None
    return s


def _strip_diff_path(path: str) -> str:
    path = path.split("\t")[0].strip()
    if path.startswith(("a/", "b/")):
        path = path[2:]
    return path


class _Parser:
    def __init__(self, lines: list[str], default_path: str | None):
        self.lines = lines
        self.n = len(lines)
        self.spans: list[_Span] = []
        self.files: dict[str, _FileEdit] = {}
        self.current = default_path
        self.consumed = 0  # lines before this index belong to an earlier span
        self.wrapper: int | None = None  # a fence opened just above the next edit
        # indexed once, so that many unclosed fences cannot make the parse quadratic
        self.closers: dict[str, list[int]] = {"`": [], "~": []}
        self.edit_starts: list[int] = []
        for k, line in enumerate(lines):
            s = line.strip()
            m = _FENCE.match(s)
            if m and not m.group("info"):
                self.closers[m.group("fence")[0]].append(k)
            elif self._edit_starts(k):
                self.edit_starts.append(k)

    def run(self) -> None:
        i = 0
        while i < self.n:
            s = self.lines[i].strip()
            if _HEAD.match(s):
                i = self._search_replace(i)
            elif _PATCH_BEGIN.match(s):
                i = self._patch(i)
            elif self._udiff_starts(i):
                i = self._udiff(i)
            elif _FENCE.match(s):
                i = self._fence(i)
            else:
                i += 1

    def _file(self, path: str, failed: bool = False) -> _FileEdit:
        key = f"failed:{path}" if failed else path
        if key not in self.files:
            self.files[key] = _FileEdit(path, failed=failed)
        return self.files[key]

    def _add_span(self, start: int, end: int, paths: list[str]) -> None:
        if self.wrapper is not None and self.wrapper < start <= self.wrapper + 4:
            start = self.wrapper  # the fence goes with the edit it wraps
        self.wrapper = None
        start = max(start, self.consumed)
        self.spans.append(_Span(start, end, paths))
        self.consumed = end

    # SEARCH/REPLACE ---------------------------------------------------------------------

    def _search_replace(self, h: int) -> int:
        start, path, failed = self._find_path(h)
        if path and not failed:
            self.current = path
        path = path or self.current or "(unknown file)"
        old: list[str] = []
        new: list[str] = []
        i = h + 1
        incomplete = True
        while i < self.n and not _DIVIDER.match(self.lines[i].strip()):
            if _HEAD.match(self.lines[i].strip()) or _UPDATED.match(self.lines[i].strip()):
                break
            old.append(self.lines[i])
            i += 1
        if i < self.n and _DIVIDER.match(self.lines[i].strip()):
            i += 1
            while i < self.n:
                s = self.lines[i].strip()
                if _UPDATED.match(s) or _DIVIDER.match(s):
                    incomplete = False
                    i += 1
                    if _DIVIDER.match(s) and i < self.n and _UPDATED.match(self.lines[i].strip()):
                        i += 1  # Aider ends at a second divider; its REPLACE marker goes too
                    break
                if _HEAD.match(s):
                    break
                new.append(self.lines[i])
                i += 1
        elif i < self.n and _UPDATED.match(self.lines[i].strip()):
            i += 1  # SEARCH with no divider: nothing replaced it
        end = i
        if end < self.n and _is_closing_fence(self.lines[end]):
            end += 1
        self._record(path, old, new, incomplete, failed)
        self._add_span(start, end, [f"failed:{path}" if failed else path])
        return end

    def _find_path(self, h: int) -> tuple[int, str | None, bool]:
        """Look back up to three lines, past fences, like Aider's ``find_filename``.

        Aider's own "failed to match" report quotes the block under a header naming the file;
        that header stays in the text (it says the edit failed) and the block is marked failed.
        """
        if h > self.consumed:
            m = _NOMATCH_PATH.search(self.lines[h - 1])
            if m:
                return h, m.group("path"), True
        start = h
        found: str | None = None
        j = h - 1
        while j >= max(self.consumed, h - 3):
            line = self.lines[j]
            cand = _as_path(line)
            is_fence = bool(_FENCE.match(line.strip()))
            if cand and not found:
                found = cand
                start = j
            elif is_fence:
                start = j
            if not is_fence:
                break
            j -= 1
        if found and start > self.consumed:
            # a lone ```lang opener just above the path line (some models emit it) goes too
            prev = self.lines[start - 1].strip()
            m = _FENCE.match(prev)
            if m and m.group("info") and _as_path(prev) is None:
                start -= 1
        return start, found, False

    def _record(
        self, path: str, old: list[str], new: list[str], incomplete: bool, failed: bool
    ) -> None:
        f = self._file(path, failed)
        f.blocks += 1
        f.incomplete |= incomplete
        if not any(x.strip() for x in old) and f.blocks == 1:
            f.created = True
            old = []
        a, r = _diff_counts(old, new)
        f.added += a
        f.removed += r
        f.old.append(old)
        f.new.append(new)

    # unified diff -----------------------------------------------------------------------

    def _udiff_starts(self, i: int) -> bool:
        line = self.lines[i]
        if _DIFF_GIT.match(line):
            return True
        return bool(_OLD.match(line) and i + 1 < self.n and _NEW.match(self.lines[i + 1]))

    def _udiff(self, i: int) -> int:
        start = i
        if start > self.consumed and _is_opening_fence(self.lines[start - 1]):
            start -= 1
        paths: list[str] = []
        while i < self.n and self._udiff_starts(i):
            i = self._udiff_file(i)
            _extend(paths, [self.current or "(unknown file)"])
        if i < self.n and _is_closing_fence(self.lines[i]):
            i += 1
        self._add_span(start, i, paths)
        return i

    def _udiff_file(self, i: int) -> int:
        old_path = new_path = None
        m = _DIFF_GIT.match(self.lines[i])
        if m:
            old_path, new_path = m.group("a"), m.group("b")
            i += 1
            while i < self.n and _DIFF_META.match(self.lines[i]):
                i += 1
        if (
            i + 1 < self.n
            and (old_m := _OLD.match(self.lines[i]))
            and (new_m := _NEW.match(self.lines[i + 1]))
        ):
            old_path = _strip_diff_path(old_m.group("path"))
            new_path = _strip_diff_path(new_m.group("path"))
            i += 2
        created = old_path == "/dev/null"
        deleted = new_path == "/dev/null"
        path = (old_path if deleted else new_path) or self.current or "(unknown file)"
        self.current = path
        old: list[str] = []
        new: list[str] = []
        while i < self.n:
            line = self.lines[i]
            if self._udiff_starts(i):
                break
            if line == "" or not line.strip():
                j = i + 1
                while j < self.n and not self.lines[j].strip():
                    j += 1
                if j < self.n and _HUNK_LINE.match(self.lines[j]) and not self._udiff_starts(j):
                    i += 1
                    continue
                break
            if not _HUNK_LINE.match(line):
                break
            _hunk_line(line, old, new)
            i += 1
        f = self._file(path)
        f.blocks += 1
        f.created |= created and f.blocks == 1
        f.deleted |= deleted
        self._patch_close(f, old, new)
        return i

    # Aider's "patch" format (V4A) --------------------------------------------------------

    def _patch(self, i: int) -> int:
        start = i
        if start > self.consumed and _is_opening_fence(self.lines[start - 1]):
            start -= 1
        i += 1
        paths: list[str] = []
        f: _FileEdit | None = None
        old: list[str] = []
        new: list[str] = []
        while i < self.n:
            s = self.lines[i].strip()
            m = _PATCH_FILE.match(s)
            if m or _PATCH_END.match(s) or _HEAD.match(s):
                if f is not None:
                    self._patch_close(f, old, new)
                f, old, new = None, [], []
            if _PATCH_END.match(s):
                i += 1
                break
            if _HEAD.match(s):
                break
            if m:
                f = self._file(m.group("path"))
                f.blocks += 1
                f.created |= m.group("action") == "Add" and f.blocks == 1
                f.deleted |= m.group("action") == "Delete"
                _extend(paths, [f"{m.group('path')}"])
                self.current = m.group("path")
            else:
                _hunk_line(self.lines[i], old, new)
            i += 1
        else:
            if f is not None:
                self._patch_close(f, old, new)
                f.incomplete = True
        if i < self.n and _is_closing_fence(self.lines[i]):
            i += 1
        if paths:
            self._add_span(start, i, paths)
        return i

    @staticmethod
    def _patch_close(f: _FileEdit, old: list[str], new: list[str]) -> None:
        f.added += sum(1 for x in new if not isinstance(x, _Ctx))
        f.removed += sum(1 for x in old if not isinstance(x, _Ctx))
        f.old.append([x.text if isinstance(x, _Ctx) else x for x in old])
        f.new.append([x.text if isinstance(x, _Ctx) else x for x in new])

    # whole file -------------------------------------------------------------------------

    def _fence(self, i: int) -> int:
        """A fenced block under a path line, with no edit markers inside, is a whole file.

        An edit starting deeper inside the fence means the fence was never closed (the reply was
        cut off): the block ends where that edit's own header begins, so that the same text
        parses the same way once the later edit has been summarised.
        """
        m = _FENCE.match(self.lines[i].strip())
        assert m is not None
        close = self._closing_index(i, m.group("fence"))
        closed = close < self.n
        nxt = bisect.bisect_right(self.edit_starts, i)
        for k in self.edit_starts[nxt : nxt + 1]:
            if k < close:
                if k - i <= 3:
                    if self.wrapper is None:
                        self.wrapper = i  # the fence wraps that edit
                    return i + 1
                while k - 1 > i and (
                    _FENCE.match(self.lines[k - 1].strip()) or _as_path(self.lines[k - 1])
                ):
                    k -= 1
                close = k
                closed = False
                break
        body = self.lines[i + 1 : close]
        path = _as_path(self.lines[i]) if m.group("info") else None
        start = i
        if path is None and i - 1 >= self.consumed:
            path = _as_path(self.lines[i - 1])
            start = i - 1
        end = close + 1 if closed else close
        if path is None:
            return end  # an ordinary code block: passed through
        f = self._file(path)
        f.blocks += 1
        f.whole = True
        f.incomplete |= not closed
        f.added += len(body)
        f.new.append(body)
        f.old.append([])
        self.current = path
        self._add_span(start, end, [path])
        return end

    def _closing_index(self, i: int, fence: str) -> int:
        closers = self.closers[fence[0]]
        for j in range(bisect.bisect_right(closers, i), len(closers)):
            if len(self.lines[closers[j]].strip()) >= len(fence):
                return closers[j]
        return self.n

    def _edit_starts(self, k: int) -> bool:
        s = self.lines[k].strip()
        return bool(_HEAD.match(s) or _PATCH_BEGIN.match(s) or self._udiff_starts(k))


class _Ctx:
    """A diff context line: shared by both sides, so names can be found, but not counted."""

    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text


def _hunk_line(line: str, old: list, new: list) -> None:
    if line.startswith("@@"):
        ctx = _Ctx(line.rsplit("@@", 1)[-1].strip() if line.count("@@") >= 2 else line[2:].strip())
        if ctx.text:
            old.append(ctx)
            new.append(ctx)
    elif line.startswith("+"):
        new.append(line[1:])
    elif line.startswith("-"):
        old.append(line[1:])
    elif line.startswith(" ") or not line.strip():
        ctx = _Ctx(line[1:])
        old.append(ctx)
        new.append(ctx)


def _is_closing_fence(line: str) -> bool:
    m = _FENCE.match(line.strip())
    return bool(m and not m.group("info"))


def _is_opening_fence(line: str) -> bool:
    return bool(_FENCE.match(line.strip()))


def _diff_counts(old: list[str], new: list[str]) -> tuple[int, int]:
    if not old or not new:
        return len(new), len(old)
    exact = len(old) <= DIFF_EXACT_LINES and len(new) <= DIFF_EXACT_LINES
    sm = difflib.SequenceMatcher(None, old, new, autojunk=not exact)
    added = removed = 0
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag in ("replace", "delete"):
            removed += i2 - i1
        if tag in ("replace", "insert"):
            added += j2 - j1
    return added, removed


# --- names ----------------------------------------------------------------------------------


def _definitions(lines: list[str]) -> list[tuple[int, str]]:
    """(line index, qualified name) of each definition; ``Bar.baz`` by indentation nesting."""
    defs: list[tuple[int, str]] = []
    stack: list[tuple[int, str]] = []
    for idx, line in enumerate(lines):
        s = line.strip()
        if not s:
            continue
        indent = len(line) - len(line.lstrip())
        while stack and indent <= stack[-1][0]:
            stack.pop()
        hit = _match_def(s, top_level=indent == 0)
        if hit is None:
            continue
        name, container, variable = hit
        if variable and indent > 0:
            continue  # a local variable, not a definition worth naming
        qual = f"{stack[-1][1]}.{name}" if stack else name
        defs.append((idx, qual))
        if container:
            stack.append((indent, name))
    return defs


def _match_def(s: str, top_level: bool) -> tuple[str, bool, bool] | None:
    """(name, is_container, is_variable) for a definition line."""
    if len(s) > 300:
        return None
    for pattern, container in _DEFS:
        m = pattern.match(s)
        if not m:
            continue
        name = m.group("name")
        typ = m.groupdict().get("type")
        if pattern is _METHOD_DEF and not (typ or m.group("brace")):
            continue
        if name in _NOT_NAMES or (typ and typ in _NOT_NAMES - {"void", "int", "bool", "str"}):
            return None
        return name, container, pattern is _VAR_DEF
    if top_level:  # module-level assignment: CONSTANT = ..., name: T = ...
        m = re.match(r"^([A-Za-z_]\w*)\s*(?::\s*[^=]+)?=(?!=)", s)
        if m and m.group(1) not in _NOT_NAMES:
            return m.group(1), False, True
    return None


def _changed(old: list[str], new: list[str]) -> tuple[list[int], list[int]]:
    exact = len(old) <= DIFF_EXACT_LINES and len(new) <= DIFF_EXACT_LINES
    sm = difflib.SequenceMatcher(None, old, new, autojunk=not exact)
    old_idx: list[int] = []
    new_idx: list[int] = []
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag != "equal":
            old_idx.extend(range(i1, i2))
            new_idx.extend(range(j1, j2))
    return old_idx, new_idx


def _enclosing(defs: list[tuple[int, str]], idx: int) -> str | None:
    k = bisect.bisect_right(defs, (idx, "\uffff"))
    return defs[k - 1][1] if k else None


def _names(edit: _FileEdit) -> list[tuple[str, list[str]]]:
    replaced: list[str] = []
    added: list[str] = []
    removed: list[str] = []
    loose_new: list[str] = []
    loose_old: list[str] = []
    for old, new in zip(edit.old, edit.new):
        d_old, d_new = _definitions(old), _definitions(new)
        names_old = {q for _, q in d_old}
        names_new = {q for _, q in d_new}
        _extend(added, [q for _, q in d_new if q not in names_old])
        _extend(removed, [q for _, q in d_old if q not in names_new])
        c_old, c_new = _changed(old, new)
        touched = [_enclosing(d_old, k) for k in c_old] + [_enclosing(d_new, k) for k in c_new]
        _extend(replaced, [q for q in touched if q and q in names_old and q in names_new])
        if not any(touched):
            ids_old = _identifiers(old[k] for k in c_old)
            ids_new = _identifiers(new[k] for k in c_new)
            all_old, all_new = set(_identifiers(old)), set(_identifiers(new))
            _extend(loose_new, [x for x in ids_new if x not in all_old])
            _extend(loose_old, [x for x in ids_old if x not in all_new])
    if edit.whole:
        return [("defines", added)] if added else []
    if not (replaced or added or removed):
        if _is_prose_path(edit.path) or edit.created:
            return []
        added = loose_new[:MAX_LOOSE_NAMES]
        removed = loose_old[: max(0, MAX_LOOSE_NAMES - len(added))]
    return [("replaced", replaced), ("added", added), ("removed", removed)]


def _extend(acc: list[str], items: list[str]) -> None:
    for x in items:
        if x not in acc:
            acc.append(x)


def _identifiers(lines) -> list[str]:
    out: list[str] = []
    for line in lines:
        if _COMMENT_LINE.match(line):
            continue
        code = _COMMENT.sub("", _STRING.sub("", line))
        for tok in _IDENT.findall(code):
            if len(tok) >= 3 and tok not in _NOT_NAMES and tok not in out:
                out.append(tok)
    return out


def _is_prose_path(path: str) -> bool:
    dot = path.rfind(".")
    return dot >= 0 and path[dot:].lower() in _PROSE_EXTS


# --- output ---------------------------------------------------------------------------------


def _summary(edit: _FileEdit, entry_id: str | None) -> str:
    ident = f" (id={entry_id})" if entry_id else ""
    partial = " (incomplete)" if edit.incomplete else ""
    if edit.failed:
        head = f"failed edit {edit.path}: +{edit.added} -{edit.removed} lines{partial}{ident}"
    elif edit.whole and not (edit.old and any(edit.old)):
        head = f"wrote {edit.path} (whole file): {edit.added} lines{partial}{ident}"
    elif edit.deleted:
        count = f": -{edit.removed} lines" if edit.removed else ""
        head = f"deleted {edit.path}{count}{partial}{ident}"
    elif edit.created:
        head = f"created {edit.path}: +{edit.added} lines{partial}{ident}"
        if edit.removed:
            head = f"created {edit.path}: +{edit.added} -{edit.removed} lines{partial}{ident}"
    else:
        head = f"edited {edit.path}: +{edit.added} -{edit.removed} lines{partial}{ident}"
    parts = [head]
    budget = MAX_NAMES
    for label, names in _names(edit):
        if not names or budget <= 0:
            continue
        shown = names[:budget]
        more = f" +{len(names) - len(shown)} more" if len(names) > len(shown) else ""
        parts.append(f"{label}: {', '.join(shown)}{more}")
        budget -= len(shown)
    return "; ".join(parts)


def _assemble(
    lines: list[str], spans: list[_Span], files: dict[str, _FileEdit], entry_id: str | None
) -> list[str]:
    """Prose in place, each file's summary where its first edit was. Blank lines left between
    dropped blocks collapse to one; blank runs inside prose stay as written."""
    out: list[str] = []
    emitted: set[str] = set()
    by_start = {s.start: s for s in spans}
    after_summary = False  # the last non-blank line out is a summary
    i = 0
    n = len(lines)
    while i < n:
        span = by_start.get(i)
        if span is None or span.end <= i:
            line = lines[i]
            blank = not line.strip()
            if not (blank and after_summary and out and not out[-1].strip()):
                out.append(line)
            if not blank:
                after_summary = bool(_SUMMARY.match(line))
            i += 1
            continue
        for path in span.paths:
            if path not in emitted:
                emitted.add(path)
                out.append(_summary(files[path], entry_id))
                after_summary = True
        i = span.end
    return out

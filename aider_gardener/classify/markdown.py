"""Find the blocks of a chat message: fences, Aider edit blocks and unified diffs.

Aider's own parser (``aider/coders/editblock_coder.py``) looks for ``<<<<<<< SEARCH`` …
``=======`` … ``>>>>>>> REPLACE`` wherever they are and takes the file name from the lines just
before; fences are optional and may be nested inside the edited text (a markdown file containing
```` ``` ````). So edit blocks are found first and fence matching never looks inside them; the
remaining fences are matched by their opening run of backticks/tildes, plus the HTML-ish fences
Aider switches to when a file itself contains triple backticks (``<source>`` …).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass

from .lines import is_path
from .textlines import Lines

FENCE_OPEN = re.compile(r"^(\s*)(`{3,}|~{3,})[ \t]*([\w.+#/\\:{}-]*)[^`~^]*$")
TAG_OPEN = re.compile(r"^\s*<(source|code|pre|codeblock|sourcecode)>\s*([\w.+#-]*)\s*$")
SEARCH = re.compile(r"^\s*<{5,9} (?:SEARCH|ORIGINAL)\s*$")
DIVIDER = re.compile(r"^\s*={5,9}\s*$")
REPLACE = re.compile(r"^\s*>{5,9} (?:REPLACE|UPDATED)\s*$")
DIFF_START = re.compile(r"^(?:diff --git |--- (?:a/|/dev/null|\S+)\s*$|Index: )")
DIFF_BODY = re.compile(
    r"^(?:[ +\-\\]|@@ |diff |index |--- |\+\+\+ |new file mode|deleted file mode|similarity |"
    r"rename |old mode|new mode|Binary files)"
)
PLUS_PATH = re.compile(r"^\+\+\+ (?:b/)?(\S+)")


@dataclass
class Block:
    a: int  # first line (path line or opening fence)
    b: int  # one past the last line
    kind: str  # "sr" | "diff" | "fence"
    lang: str = ""
    path: str = ""
    body_a: int = 0  # lines inside the fences
    body_b: int = 0
    closed: bool = True


def scan(L: Lines) -> list[Block]:
    lines = L.lines
    n = len(lines)
    sr = _edit_blocks(lines)
    sr_starts = {a: (a, b) for a, b in sr}
    sr_firsts = [a for a, _ in sr]
    blocks: list[Block] = []
    floor = 0  # lines before this belong to earlier blocks
    i = 0
    while i < n:
        if i in sr_starts:
            block = _claim_sr(lines, sr_starts[i], floor)
            blocks.append(block)
            i = floor = block.b
            continue
        line = lines[i]
        fence = FENCE_OPEN.match(line) or TAG_OPEN.match(line)
        if fence:
            k = bisect_right(sr_firsts, i)
            nxt_sr = sr_firsts[k] if k < len(sr_firsts) else n + 1
            block = _fence(lines, i, fence, floor)
            if nxt_sr < block.b:
                i += 1  # this fence wraps an edit block: the edit block claims it
                continue
            blocks.append(block)
            i = floor = block.b
            continue
        if DIFF_START.match(line):
            diff = _bare_diff(lines, i, floor)
            if diff:
                blocks.append(diff)
                i = floor = diff.b
                continue
        i += 1
    return blocks


def _edit_blocks(lines: list[str]) -> list[tuple[int, int]]:
    """Line ranges ``[SEARCH, after REPLACE)``; consecutive blocks for one fence are joined."""
    out: list[tuple[int, int]] = []
    n = len(lines)
    i = 0
    while i < n:
        if not SEARCH.match(lines[i]):
            i += 1
            continue
        j = i + 1
        while j < n and not REPLACE.match(lines[j]) and not (j > i + 1 and SEARCH.match(lines[j])):
            j += 1
        end = j + 1 if j < n and REPLACE.match(lines[j]) else j
        if out and all(not lines[x].strip() for x in range(out[-1][1], i)):
            out[-1] = (out[-1][0], end)
        else:
            out.append((i, end))
        i = end
    return out


def _claim_sr(lines: list[str], rng: tuple[int, int], floor: int) -> Block:
    """Extend an edit block back over its fence/path lines and forward over the closing fence."""
    a, b = rng
    path = ""
    lang = ""
    k = a
    while k - 1 >= floor and a - (k - 1) <= 4:
        prev = lines[k - 1]
        f = FENCE_OPEN.match(prev) or TAG_OPEN.match(prev)
        p = None if f else is_path(prev)
        if f:
            lang = lang or (f.group(3) if f.re is FENCE_OPEN else f.group(2))
        elif p:
            path = path or p
        else:
            break
        k -= 1
    n = len(lines)
    end = b
    if end < n and (_closes(lines[end]) or lines[end].strip().startswith("</")):
        end += 1
    return Block(k, end, "sr", lang=lang.lower(), path=path, body_a=a, body_b=b)


def _closes(line: str) -> bool:
    s = line.strip()
    return len(s) >= 3 and (set(s) == {"`"} or set(s) == {"~"})


def _fence(lines: list[str], i: int, m: re.Match[str], floor: int) -> Block:
    n = len(lines)
    if m.re is TAG_OPEN:
        tag, lang = m.group(1), m.group(2)
        close = re.compile(r"^\s*</" + tag + r">\s*$")
        j = i + 1
        while j < n and not close.match(lines[j]):
            j += 1
    else:
        ticks, lang = m.group(2), m.group(3)
        j = i + 1
        while j < n:
            c = FENCE_OPEN.match(lines[j])
            if c and c.group(2)[0] == ticks[0] and len(c.group(2)) >= len(ticks) and not c.group(3):
                if not lines[j].strip().strip(ticks[0]):
                    break
            j += 1
    closed = j < n
    end = j + 1 if closed else n
    path = ""
    if lang and ("/" in lang or "\\" in lang or re.search(r"\.\w{1,8}$", lang)) and is_path(lang):
        path, lang = lang, ""
    a = i
    if not path and i - 1 >= floor and is_path(lines[i - 1]):
        path = is_path(lines[i - 1]) or ""
        a = i - 1
    body_a = i + 1
    body_end = end - 1 if closed else end
    if not path and body_a + 1 < body_end and is_path(lines[body_a]):
        if FENCE_OPEN.match(lines[body_a + 1]):  # ````lang / path / ```lang / file… (confused)
            path = is_path(lines[body_a]) or ""
    body = lines[body_a : end - 1 if closed else end]
    kind = "diff" if lang.lower() in ("diff", "patch") or _is_diff(body) else "fence"
    if kind == "diff" and not path:
        path = next((pm.group(1) for x in body[:10] if (pm := PLUS_PATH.match(x))), "")
    return Block(a, end, kind, lang=lang.lower(), path=path, body_a=body_a,
                 body_b=end - 1 if closed else end, closed=closed)  # fmt: skip


def _is_diff(body: list[str]) -> bool:
    head = body[:6]
    if not any(x.startswith(("--- ", "diff --git ")) for x in head):
        return False
    return any(x.startswith("+++ ") for x in head) and any(x.startswith("@@") for x in body[:12])


def _bare_diff(lines: list[str], i: int, floor: int) -> Block | None:
    n = len(lines)
    if lines[i].startswith("--- ") and not (i + 1 < n and lines[i + 1].startswith("+++ ")):
        return None
    j = i + 1
    hunks = 0
    while j < n:
        s = lines[j]
        if s.startswith("@@"):
            hunks += 1
        if DIFF_BODY.match(s):
            j += 1
            continue
        if not s.strip() and j + 1 < n and DIFF_BODY.match(lines[j + 1]):
            j += 1
            continue
        break
    if not hunks or j - i < 3:
        return None
    path = next((pm.group(1) for x in lines[i : i + 6] if (pm := PLUS_PATH.match(x))), "")
    return Block(i, j, "diff", lang="diff", path=path, body_a=i, body_b=j)

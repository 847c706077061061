"""Cross-segment de-duplication: a failure printed N times should cost one failure, not N.

The classifier splits a test log into one error segment per failure section, each compressed on
its own, so 17 parametrized cases failing the same way would come out as 17 copies of one trace.
After per-segment compression every error segment is compared with the earlier ones: identical
once what varies between repeats is masked (header, addresses, argument lines, durations), it
becomes one line naming its test id and the first occurrence, consecutive repeats sharing one
line; the same exception raised from a different place keeps its header, its failing statement
and every ``path:line`` or error code, and points to the first for the exception text.

Lines that state facts are never masked beyond durations and addresses outside messages, so every
fact of a replaced segment is in the segment it points to. Distinct errors are left alone.

Decision record: docs/decisions/012-repeated-failures.md
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence, Union

from ..types import Compressed, ContentClass, Segment
from .base import clip_line

Out = Union[Compressed, str]

# A failure section's first line names the test: pytest, jest (also as mojibake from a Windows
# code page), unittest, go, cargo, surefire.
_HEADERS = (
    re.compile(r"^_{3,} (.+?) _{3,}\s*$"),
    re.compile(r"^\s*(?:●|ΓùÅ) (.+?)\s*$"),
    re.compile(r"^(?:FAIL|ERROR): (\S+ \([\w.]+\))"),
    re.compile(r"^\s*--- FAIL: (\S+)"),
    re.compile(r"^---- (\S+) std(?:out|err) ----\s*$"),
    re.compile(r"^\[ERROR\]\s+(\S.*?)\s+(?:--\s+)?Time elapsed:.*<<< (?:FAILURE|ERROR)!"),
)
_HEADER_SCAN = 3  # non-blank lines searched for a header (unittest prints a ==== rule first)

_HEX = re.compile(r"0x[0-9a-fA-F]+")
_DIGITS = re.compile(r"\d+")
_DURATION = re.compile(r"\d+(?:\.\d+)?\s?(?:ms|s|sec|seconds)\b")
_ARG_LINE = re.compile(r"^[A-Za-z_]\w* = \S")  # pytest prints arguments/locals unindented
_REF = re.compile(r"[\w-]\.[A-Za-z]{1,5}(?::\d|\(\d)|File \"[^\"]+\", line \d")
_CODE = re.compile(r"(?<![\w])(?:E\d{4}|TS\d{4,5}|CS\d{4}|[A-Z]{1,3}\d{3,5})(?![\w])")
_EXC = re.compile(
    r"^(?:Caused by: )?(?:[A-Za-z_][\w$]*\.)*[A-Z]\w*"
    r"(?:Error|Exception|Failure|Exit|Interrupt)\b(?::|$)"
)
_CARET = re.compile(r"^[\s|]*[\^~][\s^~]*$")
_LABEL_CHARS = 80
_SKELETON_MAX = 0.8  # a skeleton is used only when it saves at least a fifth


@dataclass
class _Info:
    index: int
    lines: list[str]
    header: int | None
    test_id: str | None
    key: str
    signature: tuple[str, ...]

    @property
    def label(self) -> str:
        first = next((x.strip() for x in self.lines if x.strip()), "")
        return clip_line(first, _LABEL_CHARS)


def dedupe_failures(segs: Sequence[Segment], outs: Sequence[Out]) -> list[Out]:
    """Replace repeated error segments' compressed text by pointers to the first occurrence."""
    result: list[Out] = list(outs)
    firsts: dict[str, _Info] = {}  # masked text -> first segment shown with it
    by_signature: dict[tuple[str, ...], _Info] = {}
    pointers: dict[int, _Info] = {}  # segment index -> the segment it repeats
    repeats: dict[int, _Info] = {}
    for i, (seg, out) in enumerate(zip(segs, outs)):
        if seg.cls is not ContentClass.ERROR or not isinstance(out, Compressed):
            continue
        if not out.text.strip():
            continue
        info = _describe(i, out.text)
        target = firsts.get(info.key)
        if target is not None:
            pointers[i] = target
            repeats[i] = info
            continue
        firsts[info.key] = info
        if not info.signature:
            continue
        earlier = by_signature.get(info.signature)
        if earlier is None:
            by_signature[info.signature] = info
            continue
        skeleton = _skeleton(info, earlier)
        if len(skeleton) <= _SKELETON_MAX * len(out.text):
            counts = {**out.counts, "same_exception_as_segment": earlier.index}
            result[i] = Compressed(skeleton, counts, out.fallback)
    for run in _runs(pointers):
        target = pointers[run[0]]
        adjacent = _previous_shown(segs, outs, run[0]) == target.index
        line = _pointer([repeats[i] for i in run], target, adjacent)
        for k, i in enumerate(run):
            counts = {"duplicate_of_segment": target.index}
            result[i] = Compressed(line if k == 0 else "", counts)
    return result


def _describe(index: int, text: str) -> _Info:
    lines = text.split("\n")
    header, test_id = _find_header(lines)
    key_lines = []
    signature = []
    for k, line in enumerate(lines):
        if k == header or not line.strip():
            continue
        if _ARG_LINE.match(line) and not _REF.search(line):
            continue  # pytest's locals differ between parametrized cases by design
        s = " ".join(line.split())
        if _is_exception(line):
            signature.append(s)  # its message is a fact, even an address in it
            key_lines.append(_DURATION.sub("<dur>", s))
            continue
        s = _HEX.sub("0x_", s)
        if _states_fact(line):
            s = _DURATION.sub("<dur>", s)
        else:
            s = _DIGITS.sub("0", s)
        key_lines.append(s)
    return _Info(index, lines, header, test_id, "\n".join(key_lines), tuple(signature))


def _find_header(lines: list[str]) -> tuple[int | None, str | None]:
    seen = 0
    for k, line in enumerate(lines):
        if not line.strip():
            continue
        for pattern in _HEADERS:
            m = pattern.match(line)
            if m:
                return k, m.group(1).strip()
        seen += 1
        if seen >= _HEADER_SCAN:
            break
    return None, None


def _is_exception(line: str) -> bool:
    """pytest's ``E`` lines, and ``pkg.SomeError: message`` lines that cite no location."""
    if line[:2] in ("E ", "E\t") or line == "E":
        return True
    return bool(_EXC.match(line.strip())) and not _REF.search(line)


def _states_fact(line: str) -> bool:
    """The failing statement, a ``path:line`` or an error code (exception lines aside)."""
    return line.startswith(">") or bool(_REF.search(line)) or bool(_CODE.search(line))


def _skeleton(info: _Info, earlier: _Info) -> str:
    """Header, failing statement and locations; the exception is the earlier one's."""
    where = f"{earlier.test_id} above" if earlier.test_id else "above"
    pointer = f"[same exception as {where}]"
    out: list[str] = []
    placed = False
    in_statement = False
    for k, line in enumerate(info.lines):
        if k == info.header:
            out.append(line)
            continue
        if not line.strip():
            in_statement = False
            continue
        if _is_exception(line):
            in_statement = False
            if not placed:
                out.append(pointer)
                placed = True
            continue
        if line.startswith(">"):
            out.append(line)
            in_statement = True
            continue
        if in_statement and line[:1].isspace() and not _CARET.match(line):
            out.append(line)  # the failing statement continues over several lines
            continue
        in_statement = False
        if _REF.search(line) or _CODE.search(line):
            out.append(line)
    if not placed:
        out.append(pointer)
    return "\n".join(out)


def _runs(pointers: dict[int, _Info]) -> list[list[int]]:
    """Consecutive segment indexes repeating the same first occurrence."""
    runs: list[list[int]] = []
    for i in sorted(pointers):
        last = runs[-1] if runs else None
        if last and last[-1] == i - 1 and pointers[last[0]] is pointers[i]:
            last.append(i)
        else:
            runs.append([i])
    return runs


def _previous_shown(segs: Sequence[Segment], outs: Sequence[Out], i: int) -> int | None:
    """The nearest earlier segment with visible output (blank runs between sections skipped)."""
    for j in range(i - 1, -1, -1):
        out = outs[j]
        text = out.text if isinstance(out, Compressed) else out
        if text.strip():
            return j
    return None


def _pointer(members: list[_Info], target: _Info, adjacent: bool) -> str:
    ids = [m.test_id for m in members if m.test_id]
    if len(members) == 1:
        where = "above" if adjacent or not target.test_id else f"{target.test_id} above"
        if ids:
            return f"[same failure as {where}: {ids[0]}]"
        return f"[same error as {where}: {members[0].label}]"
    ref = "the one above" if adjacent or not target.test_id else f"{target.test_id} above"
    what = "failures" if ids else "errors"
    named = ", ".join(ids) if ids else members[0].label
    return f"[×{len(members)} {what} identical to {ref}: {named}]"

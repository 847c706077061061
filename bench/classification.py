"""How often the classifier agrees with a person, measured on real shared data.

The gold standard must not be derived from the classifier, so this script cuts the shared data
into *labelling units* with deliberately simple rules of its own: Aider chat-history messages
(``#### `` user lines, ``> `` tool lines, assistant replies split at fences), and raw tool output
files plus the traceback regions a test runner's format delimits. A seeded, stratified sample was
labelled by hand in ``bench/labels/classification.tsv`` (positions and a short hash, never the
third-party text). Scoring runs the classifier on the whole message (or file) with the source an
integration would know and compares the majority class (by characters) over the unit's lines with
the label. ``classification_holdout.tsv``, labelled after tuning on the first, is the unbiased one.

    python -m bench.classification [--json OUT]        # score against the gold labels
    python -m bench.classification --sample [--holdout] # list a seeded sample (no text)
    python -m bench.classification --show 0:40        # print sampled units for labelling
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import os
import random
import re
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("GARDENER_SHARED_DATA", ROOT.parent / "shared" / "data"))
LABELS = ROOT / "bench" / "labels" / "classification.tsv"
HOLDOUT_LABELS = ROOT / "bench" / "labels" / "classification_holdout.tsv"
CLASSES = ("log", "code", "structured", "prose", "error", "prompt", "edit")
SEED = 20240607

# Raw tool outputs: the command a `/run` or `/test` integration would have known for each file.
TOOL_COMMANDS = {
    "pytest": "pytest",
    "jest": "npm test",
    "go-test": "go test -v ./...",
    "maven-junit": "mvn test",
    "tsc": "npx tsc --noEmit",
    "cargo": "cargo test",
    "yarn-error": "cat yarn-error.log",
    "build-log": "cat build.log",
    "app-log-java": "cat logs/latest.log",
    "system-log": "cat {name}",
    "json-api": "cat raw-fixture.json",
}


# --------------------------------------------------------------------------------------------
# Units and the messages they come from


@dataclass
class Message:
    """One message as the classifier would receive it: history decoration removed."""

    file: str
    first_line: int  # 1-based line number of lines[0] in the file
    role: str
    command: str | None
    lines: list[str]
    path: str | None = None

    @property
    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


@dataclass
class Unit:
    file: str
    start: int  # 1-based, inclusive
    end: int  # 1-based, inclusive
    kind: str
    sha1_8: str
    message: Message = field(repr=False)

    @property
    def key(self) -> tuple[str, int, int]:
        return (self.file, self.start, self.end)


def _sha(raw_lines: Iterable[str]) -> str:
    return hashlib.sha1("\n".join(raw_lines).encode("utf-8", "replace")).hexdigest()[:8]


def _read_lines(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8", errors="replace")  # universal newlines: CRLF -> LF
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


# --------------------------------------------------------------------------------------------
# Aider chat histories

_HEADER = re.compile(r"^# aider chat started at ")
_FENCE_OPEN = re.compile(r"^\s*(`{3,}|~{3,})(.*)$")
_PATH_LINE = re.compile(r"^\s*[*`]{0,2}[\w~.\\/-]*[\w-]\.[\w]{1,12}[*`]{0,2}:?\s*$")
_TRACE_HINT = re.compile(
    r"Traceback \(most recent call last\)|^\s+at \S.*[(:]\d|^panic: |Exception in thread|"
    r"^Caused by: |^\s*File \".*\", line \d",
    re.M,
)
_ENDS_MSG = re.compile(r"\S  $")  # Aider ends every history message with "  " after its text
_CMD_USER = re.compile(r"^(?:/run|/test|!)\s*(.*)$")


def _is_user(line: str) -> bool:
    return line.startswith("####") and (len(line) == 4 or line[4] == " ")


def _is_tool(line: str) -> bool:
    return line.startswith(">") and (len(line) == 1 or line[1] == " ")


def _strip_ts(line: str) -> str:
    return line[:-2] if line.endswith("  ") else line


def _clean_tool(line: str) -> str:
    return _strip_ts(line[2:] if line.startswith("> ") else line[1:])


def _clean_user(line: str) -> str:
    return _strip_ts(line[5:] if line.startswith("#### ") else line[4:])


def parse_history(path: Path, rel: str) -> list[Unit]:
    lines = _read_lines(path)
    user_lines = [x for x in lines if _is_user(x)]
    has_ts = sum(x.endswith("  ") for x in user_lines) > len(user_lines) / 2
    units: list[Unit] = []
    n = len(lines)
    i = 0
    command: str | None = None  # the shell command of the latest /run, /test or ! message

    def user_break(line: str) -> bool:
        return _is_user(line) and (not has_ts or line.endswith("  "))

    while i < n:
        line = lines[i]
        if not line.strip() or _HEADER.match(line):
            i += 1
            continue
        if user_break(line):
            j = i
            while j < n:
                if user_break(lines[j]):
                    j += 1
                    continue
                # runs separated only by blank lines are one message (pasted text, CRLF mishaps)
                k = j
                while k < n and not lines[k].strip():
                    k += 1
                if k > j and k < n and user_break(lines[k]):
                    j = k
                    continue
                break
            msg = Message(rel, i + 1, "user", None, [_clean_user(x) for x in lines[i:j]])
            units.extend(_split_reply(msg, lines, i, j, "user_"))
            m = _CMD_USER.match(msg.lines[0].strip())
            command = (m.group(1).strip() or "test") if m and len(msg.lines) == 1 else None
            i = j
            continue
        if _is_tool(line):
            i = _parse_tool_run(lines, i, rel, has_ts, command, units, user_break)
            continue
        # assistant reply: until the next user/tool/header line outside a fence
        j = i
        fence: str | None = None
        while j < n:
            cur = lines[j]
            if _HEADER.match(cur) or (user_break(cur) and (fence is None or cur.endswith("  "))):
                break
            if fence is None and _is_tool(cur):
                break
            if fence is not None and _is_tool(cur) and has_ts and cur.endswith("  "):
                break
            m = _FENCE_OPEN.match(cur)
            if m:
                if fence is None:
                    fence = m.group(1)
                elif m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                    if not m.group(2).strip():
                        fence = None
            j += 1
        k = j
        while k > i and not lines[k - 1].strip():
            k -= 1
        msg = Message(rel, i + 1, "assistant", None, lines[i:k])
        units.extend(_split_reply(msg, lines, i, k, ""))
        command = None
        i = j
    return units


def _parse_tool_run(lines, i, rel, has_ts, command, units, user_break) -> int:
    """A run of tool messages. Multi-line messages (prefix on the first line only) are units of
    their own; runs of one-line messages are grouped, split after Aider's confirm questions."""
    n = len(lines)
    group: list[int] = []  # line indexes of one-line messages

    def flush() -> None:
        if group:
            a, b = group[0], group[-1] + 1
            msg = Message(rel, a + 1, "tool", command, [_clean_tool(x) for x in lines[a:b]])
            units.append(_unit(msg, lines, a, b, "tool_cmd" if command else "tool"))
            group.clear()

    while i < n and _is_tool(lines[i]):
        line = lines[i]
        multi = False
        if has_ts and not line.endswith("  "):
            j = i + 1
            while j < n:
                cur = lines[j]
                if _HEADER.match(cur) or user_break(cur):
                    break
                if _is_tool(cur) and _ENDS_MSG.search(cur):
                    break
                j += 1
                if _ENDS_MSG.search(cur):
                    break
            multi = j > i + 1
        elif not has_ts:
            j = i + 1
            while (
                j < n and lines[j].strip() and not _is_tool(lines[j]) and not user_break(lines[j])
            ):
                j += 1
            multi = j > i + 1
        if multi:
            flush()
            body = [_clean_tool(line)] + [_strip_ts(x) for x in lines[i + 1 : j]]
            while len(body) > 1 and not body[-1].strip():
                body.pop()
                j -= 1
            msg = Message(rel, i + 1, "tool", command, body)
            units.append(_unit(msg, lines, i, j, "tool_cmd" if command else "tool_raw"))
            i = j
            continue
        group.append(i)
        i += 1
        if "to the chat?" in line or "(y/n" in line.lower() or "(Y)es/(N)o" in line:
            flush()
    flush()
    return i


def _unit(msg: Message, lines: list[str], a: int, b: int, kind: str) -> Unit:
    """Unit over file lines [a, b) (0-based), i.e. 1-based a+1 .. b."""
    raw = lines[a:b]
    if _TRACE_HINT.search("\n".join(raw)):
        kind += "+tb"
    return Unit(msg.file, a + 1, b, kind, _sha(raw), msg)


def _split_reply(msg: Message, lines: list[str], a: int, b: int, prefix: str) -> list[Unit]:
    """Prose runs, fenced blocks (with a directly preceding path line), bare SEARCH/REPLACE."""
    units: list[Unit] = []
    body = lines[a:b] if prefix == "" else [_clean_user(x) for x in lines[a:b]]
    k = 0
    run_start = 0

    def emit_prose(s: int, e: int) -> None:
        while s < e and not body[s].strip():
            s += 1
        while e > s and not body[e - 1].strip():
            e -= 1
        if e <= s:
            return
        # long runs are cut at blank lines into paragraph groups of <= ~30 lines
        chunk_start = s
        for t in range(s, e + 1):
            if t == e or (t - chunk_start >= 30 and not body[t].strip()):
                cs, ce = chunk_start, t
                while ce > cs and not body[ce - 1].strip():
                    ce -= 1
                if ce > cs:
                    units.append(_unit(msg, lines, a + cs, a + ce, prefix + "prose"))
                chunk_start = t + 1
                while chunk_start < e and not body[chunk_start].strip():
                    chunk_start += 1

    n = len(body)
    while k < n:
        m = _FENCE_OPEN.match(body[k])
        bare_sr = body[k].startswith("<<<<<<< SEARCH")
        if not m and not bare_sr:
            k += 1
            continue
        start = k
        if k > run_start and _PATH_LINE.match(body[k - 1]) and body[k - 1].strip():
            start = k - 1
        emit_prose(run_start, start)
        if bare_sr:
            e = k + 1
            while e < n and not body[e].startswith(">>>>>>> REPLACE"):
                e += 1
            e = min(e + 1, n)
            kind = "sr"
        else:
            ticks = m.group(1)
            lang = m.group(2).strip().split()[0].lower() if m.group(2).strip() else ""
            e = k + 1
            while e < n:
                c = _FENCE_OPEN.match(body[e])
                if c and c.group(1)[0] == ticks[0] and len(c.group(1)) >= len(ticks):
                    if not c.group(2).strip():
                        break
                e += 1
            e = min(e + 1, n)
            inner = "\n".join(body[k:e])
            if "<<<<<<< SEARCH" in inner:
                kind = "sr"
            elif lang == "diff" or ("\n--- " in inner and "\n+++ " in inner):
                kind = "diff"
            elif start < k:
                kind = "pathfence"
            else:
                kind = "fence:" + (lang or "none")
        units.append(_unit(msg, lines, a + start, a + e, prefix + kind))
        k = e
        run_start = e
    emit_prose(run_start, n)
    return units


# --------------------------------------------------------------------------------------------
# Raw tool outputs

_PYTEST_SECTION = re.compile(r"^_{3,} .* _{3,}$")
_PYTEST_BAR = re.compile(r"^={3,}")
_JAVA_EXC = re.compile(r"^\s*(?:[\w$]+\.)+[\w$]*(?:Exception|Error)\b")
_AT_FRAME = re.compile(r"^\s+at \S")
_TOP_SECTION = re.compile(r"^[A-Z][\w ]*: ?$")


def _tool_kinds() -> dict[str, str]:
    kinds: dict[str, str] = {}
    src = SHARED / "tool_outputs" / "SOURCES.tsv"
    if src.is_file():
        with src.open(encoding="utf-8") as fh:
            for row in csv.DictReader(fh, delimiter="\t"):
                kinds[row["file"]] = row["kind"]
    return kinds


def tool_output_units() -> list[Unit]:
    base = SHARED / "tool_outputs"
    kinds = _tool_kinds()
    units: list[Unit] = []
    for path in sorted(base.iterdir()):
        if not path.is_file() or path.name not in kinds:
            continue
        rel = f"tool_outputs/{path.name}"
        lines = _read_lines(path)
        kind = kinds[path.name]
        command = TOOL_COMMANDS.get(kind, "").format(name=path.name) or None
        msg = Message(rel, 1, "tool", command, lines)
        units.append(Unit(rel, 1, len(lines), "file", _sha(lines), msg))
        for a, b in _trace_regions(lines, kind):
            units.append(Unit(rel, a + 1, b, "region", _sha(lines[a:b]), msg))
    return units + more_tool_output_units()


def more_tool_output_units() -> list[Unit]:
    """``tool_outputs_more``: one unit per whole file, no command known (its
    SOURCES.tsv names no kind), so the content alone must decide."""
    base = SHARED / "tool_outputs_more"
    if not base.is_dir():
        return []
    units: list[Unit] = []
    for path in sorted(base.iterdir()):
        if not path.is_file() or path.name.startswith(("SOURCES", "LICENSE")):
            continue
        rel = f"tool_outputs_more/{path.name}"
        lines = _read_lines(path)
        msg = Message(rel, 1, "tool", None, lines)
        units.append(Unit(rel, 1, len(lines), "file", _sha(lines), msg))
    return units


def _trace_regions(lines: list[str], kind: str) -> list[tuple[int, int]]:
    """Regions a person would cut out by the runner's own format: pytest failure sections,
    Java/JS exception lines followed by ``at`` frames, yarn-error report sections."""
    regions: list[tuple[int, int]] = []
    n = len(lines)
    if kind == "pytest":
        i = 0
        while i < n:
            if _PYTEST_SECTION.match(lines[i]):
                j = i + 1
                while (
                    j < n
                    and not _PYTEST_SECTION.match(lines[j])
                    and not _PYTEST_BAR.match(lines[j])
                ):
                    j += 1
                regions.append((i, j))
                i = j
            else:
                i += 1
    elif kind == "yarn-error":
        starts = [i for i, x in enumerate(lines) if _TOP_SECTION.match(x)] + [n]
        for a, b in zip(starts, starts[1:]):
            while b > a and not lines[b - 1].strip():
                b -= 1
            if b - a >= 5:
                regions.append((a, b))
    else:
        i = 0
        while i < n:
            if _JAVA_EXC.match(lines[i]) or lines[i].strip().startswith("Error: "):
                j = i + 1
                while j < n and not _AT_FRAME.match(lines[j]) and j - i < 4 and lines[j].strip():
                    j += 1
                if j < n and _AT_FRAME.match(lines[j]):
                    while j < n and (
                        _AT_FRAME.match(lines[j]) or lines[j].lstrip().startswith("...")
                    ):
                        j += 1
                    regions.append((i, j))
                    i = j
                    continue
            i += 1
    return regions


# --------------------------------------------------------------------------------------------
# All units, and the seeded stratified sample


def all_units() -> list[Unit]:
    units = tool_output_units()
    hist = SHARED / "aider_histories"
    for path in sorted(hist.glob("*.md")):
        units.extend(parse_history(path, f"aider_histories/{path.name}"))
    return units


# per history file: how many units of each kind group to draw
QUOTAS = {
    "user_prose": 5,
    "user_block": 4,
    "tool": 3,
    "tool_raw": 3,
    "tool_cmd": 12,
    "trace": 6,
    "prose": 6,
    "sr": 4,
    "diff": 3,
    "pathfence": 3,
    "fence": 2,  # per language
}
FENCE_CAP = 10  # per file, over all languages


def _group(kind: str) -> str:
    base = kind.split("+")[0]
    if "+tb" in kind:
        return "trace"
    if base.startswith("user_"):
        return "user_prose" if base == "user_prose" else "user_block"
    if base.startswith("fence:"):
        return base
    return base


def sample(units: list[Unit], seed: int = SEED) -> list[Unit]:
    rng = random.Random(seed)
    chosen: list[Unit] = [
        u for u in units if u.file.startswith(("tool_outputs/", "tool_outputs_more/"))
    ]
    by_file: dict[str, list[Unit]] = defaultdict(list)
    for u in units:
        if u.file.startswith("aider_histories/"):
            by_file[u.file].append(u)
    for file in sorted(by_file):
        strata: dict[str, list[Unit]] = defaultdict(list)
        for u in by_file[file]:
            strata[_group(u.kind)].append(u)
        fence_taken = 0
        for name in sorted(strata):
            pool = strata[name]
            if name.startswith("fence:"):
                quota = min(QUOTAS["fence"], FENCE_CAP - fence_taken)
                if quota <= 0:
                    continue
            else:
                quota = QUOTAS.get(name, 2)
            picked = rng.sample(pool, min(quota, len(pool)))
            if name.startswith("fence:"):
                fence_taken += len(picked)
            chosen.extend(picked)
    chosen.sort(key=lambda u: (u.file, u.start))
    return chosen + _supplement(units, chosen, seed)


# Rare kinds the per-file quotas under-sample: structured-data fences and tracebacks. Drawn with
# their own generator after the main sample, so adding them left the main sample unchanged.
SUPPLEMENT = {"data_fence": 25, "trace": 16}
_DATA_LANGS = ("json", "jsonc", "yaml", "yml", "toml", "xml", "csv")


def _supplement(units: list[Unit], chosen: list[Unit], seed: int) -> list[Unit]:
    taken = {u.key for u in chosen}
    pools: dict[str, list[Unit]] = {"data_fence": [], "trace": []}
    for u in units:
        if u.key in taken or not u.file.startswith("aider_histories/"):
            continue
        base = u.kind.split("+")[0]
        if base.split(":")[-1] in _DATA_LANGS and "fence:" in base:
            pools["data_fence"].append(u)
        elif "+tb" in u.kind:
            pools["trace"].append(u)
    extra: list[Unit] = []
    for name in sorted(pools):
        rng = random.Random(f"{seed}:supplement:{name}")
        pool = pools[name]
        extra.extend(rng.sample(pool, min(SUPPLEMENT[name], len(pool))))
    extra.sort(key=lambda u: (u.file, u.start))
    return extra


HOLDOUT_PER_GROUP = 9


def holdout_sample(units: list[Unit], seed: int = SEED) -> list[Unit]:
    """A second, smaller sample drawn after the classifier was tuned on the first one, labelled
    blind and never tuned on: its accuracy is the honest estimate for unseen text."""
    taken = {u.key for u in sample(units, seed)}
    groups: dict[str, list[Unit]] = defaultdict(list)
    for u in units:
        if u.key not in taken and u.file.startswith("aider_histories/"):
            g = _group(u.kind)
            groups["fence" if g.startswith("fence:") else g].append(u)
    out: list[Unit] = []
    for name in sorted(groups):
        rng = random.Random(f"{seed}:holdout:{name}")
        pool = groups[name]
        out.extend(rng.sample(pool, min(HOLDOUT_PER_GROUP, len(pool))))
    out.sort(key=lambda u: (u.file, u.start))
    return out


# --------------------------------------------------------------------------------------------
# Labels and scoring


def load_labels(path: Path = LABELS) -> list[dict[str, str]]:
    with path.open(encoding="utf-8") as fh:
        rows = [r for r in csv.DictReader(_no_comments(fh), delimiter="\t")]
    return rows


def _no_comments(lines: Iterable[str]) -> Iterable[str]:
    return (x for x in lines if not x.startswith("#"))


def _line_offsets(text: str) -> list[int]:
    offs = [0]
    for m in re.finditer("\n", text):
        offs.append(m.end())
    return offs


def predict(unit: Unit, use_source: bool = True) -> tuple[str, float | None]:
    """Majority class (by characters) of the classifier's segments over the unit's lines, and the
    time ``segment`` took on the whole message (None when it was already segmented)."""
    msg = unit.message
    text = msg.text
    offs = _line_offsets(text)
    a = offs[unit.start - msg.first_line]
    end_idx = unit.end - msg.first_line + 1
    b = offs[end_idx] if end_idx < len(offs) else len(text)
    segs, dt = _segments(msg, use_source)
    weight: Counter[str] = Counter()
    for s in segs:
        lo, hi = max(a, s.start), min(b, s.end)
        if hi > lo:
            weight[s.cls.value] += len(text[lo:hi].strip()) or (hi - lo) * 1e-3
    return (weight.most_common(1)[0][0] if weight else "none"), dt


_SEG_CACHE: dict[tuple[str, int, bool], list] = {}


def _segments(msg: Message, use_source: bool) -> tuple[list, float | None]:
    from aider_gardener.classify import segment
    from aider_gardener.types import Source

    key = (msg.file, msg.first_line, use_source)
    if key in _SEG_CACHE:
        return _SEG_CACHE[key], None
    src = Source(role=msg.role, command=msg.command) if use_source else Source()
    t0 = time.perf_counter()
    segs = segment(msg.text, src)
    dt = time.perf_counter() - t0
    _SEG_CACHE[key] = segs
    return segs, dt


def score(use_source: bool = True, labels: Path = LABELS) -> dict:
    """Compare predictions with the gold labels; returns the numbers the report prints."""
    rows = load_labels(labels)
    units = {u.key: u for u in all_units()}
    confusion: dict[str, Counter[str]] = defaultdict(Counter)
    missing, stale, errors = [], [], []
    timings: list[float] = []
    for r in rows:
        key = (r["file"], int(r["start_line"]), int(r["end_line"]))
        u = units.get(key)
        if u is None:
            missing.append(key)
            continue
        if u.sha1_8 != r["sha1_8"]:
            stale.append(key)
            continue
        pred, dt = predict(u, use_source)
        if dt is not None:
            timings.append(dt)
        confusion[r["label"]][pred] += 1
        if pred != r["label"]:
            errors.append(
                {"file": key[0], "start": key[1], "end": key[2], "gold": r["label"], "pred": pred}
            )
    total = sum(sum(c.values()) for c in confusion.values())
    correct = sum(confusion[c][c] for c in confusion)
    per_class = {}
    for c in CLASSES:
        tp = confusion[c][c]
        gold_n = sum(confusion[c].values())
        pred_n = sum(confusion[g][c] for g in confusion)
        per_class[c] = {
            "gold": gold_n,
            "precision": tp / pred_n if pred_n else None,
            "recall": tp / gold_n if gold_n else None,
        }
    return {
        "accuracy": correct / total if total else 0.0,
        "total": total,
        "correct": correct,
        "confusion": {g: dict(c) for g, c in confusion.items()},
        "per_class": per_class,
        "errors": errors,
        "missing": missing,
        "stale": stale,
        "use_source": use_source,
        "timings": timings,
    }


def format_report(res: dict) -> str:
    cols = list(CLASSES) + sorted({p for c in res["confusion"].values() for p in c} - set(CLASSES))
    out = ["gold \\ pred  " + " ".join(f"{c[:6]:>6}" for c in cols) + "   total"]
    for g in CLASSES:
        row = res["confusion"].get(g, {})
        if not row:
            continue
        out.append(
            f"{g:<12} "
            + " ".join(f"{row.get(c, 0):>6}" for c in cols)
            + f"   {sum(row.values()):>5}"
        )
    out.append("")
    out.append("class        gold  precision  recall")
    for c, v in res["per_class"].items():
        p = "-" if v["precision"] is None else f"{v['precision']:.3f}"
        r = "-" if v["recall"] is None else f"{v['recall']:.3f}"
        out.append(f"{c:<12} {v['gold']:>4}  {p:>9}  {r:>6}")
    out.append("")
    out.append(f"accuracy: {res['correct']}/{res['total']} = {res['accuracy']:.3f}")
    if res["missing"] or res["stale"]:
        out.append(f"labels not found: {len(res['missing'])}, hash changed: {len(res['stale'])}")
    for e in res["errors"]:
        out.append(f"  miss {e['file']}:{e['start']}-{e['end']} gold={e['gold']} pred={e['pred']}")
    return "\n".join(out)


def _show(units: list[Unit], sel: str, width: int, head: int, tail: int) -> None:
    a, _, b = sel.partition(":")
    for idx in range(int(a or 0), min(int(b or len(units)), len(units))):
        u = units[idx]
        raw = _read_lines(SHARED / u.file)[u.start - 1 : u.end]
        print(f"=== #{idx} {u.file} {u.start}-{u.end} {u.sha1_8} kind={u.kind} lines={len(raw)}")
        show = (
            raw
            if len(raw) <= head + tail
            else raw[:head] + [f"   ... {len(raw) - head - tail} lines ..."] + raw[-tail:]
        )
        for x in show:
            print("  | " + x[:width])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--json", metavar="OUT", help="also write the results as JSON")
    ap.add_argument("--sample", action="store_true", help="list the seeded sample")
    ap.add_argument("--show", metavar="A:B", help="print sampled units A..B for labelling")
    ap.add_argument("--width", type=int, default=160)
    ap.add_argument("--head", type=int, default=14)
    ap.add_argument("--tail", type=int, default=5)
    ap.add_argument("--stats", action="store_true", help="unit counts per kind")
    ap.add_argument("--holdout", action="store_true", help="--sample/--show the holdout sample")
    args = ap.parse_args(argv)
    if not SHARED.is_dir():
        print(f"shared data not found at {SHARED}", file=sys.stderr)
        return 2
    if args.stats:
        units = all_units()
        c = Counter((u.file.split("/")[-1][:20], _group(u.kind)) for u in units)
        for k, v in sorted(c.items()):
            print(k, v)
        print("total", len(units))
        return 0
    if args.sample or args.show:
        units = holdout_sample(all_units()) if args.holdout else sample(all_units())
        if args.show:
            _show(units, args.show, args.width, args.head, args.tail)
        else:
            for i, u in enumerate(units):
                print(f"{i}\t{u.file}\t{u.start}\t{u.end}\t{u.sha1_8}\t{u.kind}")
        return 0
    import aider_gardener  # noqa: F401  (offline switches before anything else loads)

    res = score(use_source=True)
    print(format_report(res))
    blind = score(use_source=False)
    print(f"\nwithout source hints (content cues only): accuracy {blind['accuracy']:.3f}")
    out = {"with_source": res, "blind": blind}
    if HOLDOUT_LABELS.is_file():
        hold = score(use_source=True, labels=HOLDOUT_LABELS)
        print("\nholdout (labelled after tuning, never tuned on):")
        print(format_report(hold))
        out["holdout"] = hold
    timings = sorted(res.pop("timings"))
    if timings:
        print(
            f"\nsegment() per message/file: median {1000 * timings[len(timings) // 2]:.2f} ms, "
            f"max {1000 * timings[-1]:.2f} ms over {len(timings)} distinct inputs"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2, default=str))
    return 0 if res["total"] else 1


if __name__ == "__main__":
    sys.exit(main())

"""Structured data (JSON, JSON Lines, YAML, TOML, CSV) shown as its shape plus a few samples.

An API response or a lock file is mostly repetition: the model needs the keys, the kinds of
values and one or two examples, not the 500th record. So the data is parsed with the standard
parsers and re-rendered compactly: arrays keep two samples and say how many more items there are,
deep nesting folds to a count, long strings are clipped, and ``opts.keep_keys`` keep their full
value. Input the parsers reject is repaired when that is cheap, else folded textually by bracket
depth or indentation, so that nothing raises and nothing grows. Rows are never hidden whole: the
id-like fields (``id``, ``*_id``, ``name``, ``path``, ``url``, …) of every other row follow, one
line a row, up to ``ID_CHARS``, since those are what an agent reads a query's rows for.

Re-compressing the output changes nothing: it ends with a ``[structured …]`` marker line, and
text carrying that marker is returned as it is.

Decision record: docs/decisions/016-structured-data-and-tables.md
"""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass
from typing import Any, Iterable

import yaml

try:  # Python 3.11+
    import tomllib
except ImportError:  # pragma: no cover - Python 3.10: TOML is then folded as text
    tomllib = None  # type: ignore[assignment]

from ..tokens import count_tokens
from ..types import Compressed, CompressOptions
from . import paths
from .base import clip_line
from .text_table import text_table

_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

MARKER_RE = re.compile(r"^\[structured (?:json|jsonl|yaml|toml|csv|table|text)\b[^\n]*\]$", re.M)

TARGET_RATIO = 0.25
# Input sizes from which the 2nd, 3rd and 4th level may be tried: squeezing a small document to a
# quarter would fold away most of what it says, for a saving of a few dozen tokens.
LEVEL_MIN_CHARS = (1500, 6000, 6000)
SAMPLES = 2
MAX_FLAGGED = 20  # failure-looking array items shown besides the samples
MAX_FULL_CHARS = 100_000  # a keep_keys value is shown in full, up to this
MAX_FACTS = 40
ID_CHARS = 8000  # id tables of one rendering: ~2,000 tokens, the Claude Code summary budget
ID_SAMPLE = 200  # rows looked at to choose the id columns
MAX_ID_COLUMNS = 4
MAX_ID_CHARS = 200  # a path or URL is kept whole up to this
_ID_NAMES = frozenset(
    "id uuid guid key name path file filename sha hash number url uri href slug ref email login"
    " username".split()
)
_ID_SUFFIXES = ("id", "uuid", "key", "name", "path", "file", "sha", "hash", "number", "url", "ref")
CSV_SUMMARY_ROWS = 200_000
TOKEN_CHECK_CHARS = 300_000


@dataclass(frozen=True)
class _Level:
    """How hard one rendering squeezes; levels are tried in order until the target ratio fits."""

    depth: int  # containers nested deeper than this fold to a count
    max_str: int  # strings longer than this are clipped
    max_keys: int  # objects show at most this many keys (plus keep_keys)
    inline: int  # containers whose compact form fits this width stay on one line


LEVELS = (
    _Level(3, 120, 40, 100),
    _Level(3, 72, 16, 90),
    _Level(2, 48, 10, 80),
    _Level(1, 32, 6, 60),
)

_EXT_FORMAT = {
    ".json": "json",
    ".geojson": "json",
    ".ipynb": "json",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".toml": "toml",
    ".csv": "csv",
    ".tsv": "csv",
}

_FAILURE_WORDS = re.compile(
    r"^(?:fail|failed|failure|failing|error|errored|fatal|critical|broken|crash|crashed)$", re.I
)
_STATUS_KEYS = frozenset(
    {"status", "state", "outcome", "result", "level", "severity", "conclusion", "type"}
)
_BARE_KEY = re.compile(r"^[A-Za-z_$][\w$.-]*$")
# Facts are found from an anchor that cannot backtrack (".py:12", "Error"), then widened by hand:
# a pattern that starts with a free [\w./-]+ goes quadratic on a megabyte-long "word".
_CODE_RE = re.compile(r"\b(?:E\d{4}|TS\d{4,5}|CS\d{4})\b")
_PATH_ANCHOR = re.compile(r"\.[A-Za-z]{1,5}(?:::[\w\[\]\-.:]{1,200}|[:(]\d{1,9}\b)")
_EXC_RE = re.compile(r"\b[A-Z]\w{0,100}?(?:Error|Exception)\b(?::[ \t]*[^\n\"\\]{1,80})?")
_PATH_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./\\-")
_FENCE_RE = re.compile(r"\A(\s*```[\w+-]*[ \t]*\n)(.*?)(\n[ \t]*```\s*)\Z", re.S)


class _Unparsed(Exception):
    """The text is not (repairable) data in the format tried."""


def compress_structured(text: str, opts: CompressOptions) -> Compressed:
    if not text.strip() or MARKER_RE.search(text) or paths.MARKER_RE.search(text):
        return Compressed(text, {"chars": len(text)})
    tree = paths.compress_paths(text, opts)
    if tree is not None:
        return tree
    head, body, tail = _split_fence(text)
    fmt = _format_from_path(opts.source.path) or _sniff(body)
    notes: list[str] = []
    counts: dict[str, int] = {"chars": len(text)}
    try:
        data, fmt, notes = _parse(body, fmt)
        if isinstance(data, _Table):
            rendered, summary = data.render(opts.entry_id)
        else:
            rendered, summary = _render_best(data, body, opts.keep_keys, opts.model, opts.entry_id)
    except (_Unparsed, RecursionError, MemoryError):
        fmt = "text"
        rendered, summary = _text_fold(body)
        counts["textual"] = 1
    facts = _missing_facts(body, rendered)
    if facts:
        rendered += "\n[kept facts: " + "; ".join(facts) + "]"
    note = f"; {', '.join(notes)}" if notes else ""
    out = f"{head}{rendered}{tail}".rstrip("\n") + f"\n[structured {fmt}: {summary}{note}]"
    if not _shorter(out, text, opts.model):
        return Compressed(text, counts)
    counts["chars_out"] = len(out)
    return Compressed(out, counts)


def _shorter(out: str, text: str, model: str) -> bool:
    if len(out) >= len(text):
        return False
    if len(out) < 0.8 * len(text):  # far shorter in characters is shorter in tokens too
        return True
    return count_tokens(out, model) < count_tokens(text, model)


def _split_fence(text: str) -> tuple[str, str, str]:
    """A fenced ```json block keeps its fence lines; only the inside is data."""
    m = _FENCE_RE.match(text)
    return (m.group(1), m.group(2), m.group(3)) if m else ("", text, "")


def _format_from_path(path: str | None) -> str | None:
    if not path:
        return None
    lower = path.lower()
    for ext, fmt in _EXT_FORMAT.items():
        if lower.endswith(ext):
            return fmt
    return None


def _sniff(body: str) -> str:
    s = body.lstrip()
    if s.startswith(("{", "[")):
        if re.match(r"\[[\w.\"' -]+\]\s*\n", s) and re.search(r"^\s*[\w.\"'-]+\s*=", s, re.M):
            return "toml"  # "[section]" then "key = value"
        return "json"
    if text_table(body) is not None:  # psql, mysql, sqlite: rows, not log lines
        return "table"
    sample = s[:4000].splitlines()[:40]
    lines = [x for x in sample if x.strip() and not x.lstrip().startswith("#")]
    if not lines:
        return "text"
    toml_like = sum(
        bool(re.match(r"\s*(?:\[\[?[\w.\"' -]+\]\]?|[\w.\"'-]+\s*=)", x)) for x in lines
    )
    yaml_like = sum(bool(re.match(r"\s*(?:- |[\w.\"'/ -]+:(?:\s|$)|---|\.\.\.)", x)) for x in lines)
    if toml_like >= 0.7 * len(lines):
        return "toml"
    if yaml_like >= 0.7 * len(lines):
        return "yaml"
    if _csv_delimiter(lines):
        return "csv"
    return "yaml" if yaml_like >= 0.5 * len(lines) else "text"


# --- parsing ---------------------------------------------------------------------------------


def _parse(body: str, fmt: str) -> tuple[Any, str, list[str]]:
    """Returns (data, format, notes); raises _Unparsed or RecursionError."""
    if fmt == "json":
        try:
            return json.loads(body), "json", []
        except ValueError:  # JSONDecodeError, or an integer too long to convert
            pass
        rows = _json_lines(body)
        if rows is not None:
            return rows, "jsonl", []
        data, note = _repair_json(body)
        return data, "json", [note]
    if fmt == "jsonl":
        rows = _json_lines(body, strict=False)
        if rows is None:
            raise _Unparsed
        return rows, "jsonl", []
    if fmt == "toml":
        if tomllib is None:
            raise _Unparsed
        try:
            return tomllib.loads(body), "toml", []
        except (tomllib.TOMLDecodeError, ValueError):
            return _parse(body, "yaml")  # "[x]\nkey = 1" sniffed wrong: one more chance
    if fmt == "yaml":
        try:
            docs = list(yaml.load_all(body, Loader=_YAML_LOADER))
        except (yaml.YAMLError, ValueError, TypeError, OverflowError) as err:  # bad dates too
            raise _Unparsed from err
        docs = [d for d in docs if d is not None]
        if not docs or (len(docs) == 1 and not isinstance(docs[0], (dict, list))):
            raise _Unparsed  # plain text parses as one YAML string; that is not data
        return (docs[0] if len(docs) == 1 else docs), "yaml", []
    if fmt == "csv":
        return _Table.parse(body), "csv", []
    if fmt == "table":
        table = text_table(body)
        if table is None:
            raise _Unparsed
        notes = [clip_line(x, 120) for x in table.notes[:2]]
        return _Table([table.header, *table.rows], "|"), "table", notes
    raise _Unparsed


def _json_lines(body: str, strict: bool = True) -> list | None:
    lines = [x for x in body.splitlines() if x.strip()]
    if len(lines) < 2:
        return None
    rows: list[Any] = []
    for line in lines:
        try:
            rows.append(json.loads(line))
        except ValueError:  # JSONDecodeError, or an integer too long to convert
            if strict:
                return None
            rows.append(line.strip())
    return rows


_JSON_TOKEN = re.compile(
    r'"(?:[^"\\\n]|\\.)*"|"(?:[^"\\\n]|\\.)*\Z|//[^\n]*|/\*.*?(?:\*/|\Z)|[\[\]{},]', re.S
)


def _repair_json(body: str) -> tuple[Any, str]:
    """Comments (JSONC) and trailing commas removed; a truncated document cut back to its last
    complete value and its open brackets closed. Cheap, and far more useful than folding."""
    fixed = _strip_jsonc(body)
    if fixed != body:
        try:
            return json.loads(fixed), "comments or trailing commas removed"
        except ValueError:  # JSONDecodeError, or an integer too long to convert
            pass
    # Truncated: remember each comma and opening bracket with the brackets open there.
    stack: list[str] = []
    cuts: list[tuple[int, str]] = []
    for m in _JSON_TOKEN.finditer(fixed):
        tok = m.group(0)
        if tok in "[{":
            stack.append("]" if tok == "[" else "}")
            cuts.append((m.end(), "".join(reversed(stack))))
        elif tok in "]}":
            if not stack:
                raise _Unparsed
            stack.pop()
        elif tok == ",":
            cuts.append((m.start(), "".join(reversed(stack))))
    if not stack:
        raise _Unparsed  # balanced but invalid: not a truncation we can mend
    for pos, closers in reversed(cuts[-8:]):
        try:
            return json.loads(fixed[:pos] + closers), "truncated input closed"
        except ValueError:  # JSONDecodeError, or an integer too long to convert
            continue
    raise _Unparsed


_GAP = re.compile(r"\s*(?://[^\n]*|/\*.*?(?:\*/|\Z))?", re.S)


def _strip_jsonc(body: str) -> str:
    parts = []
    last = 0
    for m in _JSON_TOKEN.finditer(body):
        tok = m.group(0)
        drop = tok[0] == "/" or (tok == "," and _next_char(body, m.end()) in ("}", "]"))
        if drop:
            parts.append(body[last : m.start()])
            last = m.end()
    parts.append(body[last:])
    return "".join(parts)


def _next_char(body: str, pos: int) -> str:
    """The next character that is not whitespace or inside a comment."""
    while True:
        m = _GAP.match(body, pos)
        if m is None or m.end() == pos:
            return body[pos : pos + 1]
        pos = m.end()


# --- rendering -------------------------------------------------------------------------------


def _render_best(
    data: Any, body: str, keep: frozenset[str], model: str, entry_id: str | None = None
) -> tuple[str, str]:
    """The first level whose rendering meets the target ratio, else the shortest one.

    The ratio is checked in characters, then in tokens (indentation is cheap in tokens, so a
    character ratio flatters); huge inputs skip the token check, characters are close enough there.
    """
    levels = LEVELS[: 1 + sum(len(body) >= size for size in LEVEL_MIN_CHARS)]
    best: tuple[str, str] | None = None
    body_tokens = 0
    for level in levels:
        text = _Renderer(level, keep, entry_id).render(data)
        if best is None or len(text) < len(best[0]):
            best = (text, _describe(data, level))
        if len(text) > TARGET_RATIO * len(body):
            continue
        if len(body) > TOKEN_CHECK_CHARS:
            break
        body_tokens = body_tokens or count_tokens(body, model)
        if count_tokens(text, model) <= TARGET_RATIO * body_tokens:
            break
    assert best is not None
    return best


def _describe(data: Any, level: _Level) -> str:
    what = (
        f"{len(data):,} top-level items"
        if isinstance(data, list)
        else f"{len(data):,} top-level keys" if isinstance(data, dict) else "a single value"
    )
    return (
        f"{what}; arrays keep {SAMPLES} samples, objects {level.max_keys} keys, nesting beyond"
        f" {level.depth} folded, strings clipped at {level.max_str} chars"
    )


class _Renderer:
    """Indented, JSON-like, no commas: cheap in tokens and unambiguous to read."""

    def __init__(self, level: _Level, keep: frozenset[str], entry_id: str | None = None) -> None:
        self.lv = level
        self.keep = keep
        self.entry_id = entry_id
        self.id_chars = ID_CHARS  # shared by every id table of one rendering
        self.lines: list[str] = []

    def render(self, data: Any) -> str:
        self._node(data, "", "", 0)
        return "\n".join(self.lines)

    def _node(self, value: Any, indent: str, prefix: str, depth: int) -> None:
        if not isinstance(value, (dict, list)):
            self.lines.append(f"{indent}{prefix}{_scalar(value, self.lv.max_str)}")
            return
        is_dict = isinstance(value, dict)
        if not value:
            self.lines.append(f"{indent}{prefix}{'{}' if is_dict else '[]'}")
            return
        small = _inline(value, self.lv.inline - len(indent) - len(prefix), self.lv.max_str)
        if small is not None and not (self.keep and _has_keep_key(value, self.keep)):
            self.lines.append(f"{indent}{prefix}{small}")
            return
        n = len(value)
        if depth > self.lv.depth:
            fold = f"{{… {n:,} keys …}}" if is_dict else f"[… {n:,} items …]"
            self.lines.append(f"{indent}{prefix}{fold}")
            self._rescue(value, indent + "  ", "")
            return
        self.lines.append(f"{indent}{prefix}{'{' if is_dict else '['}")
        if isinstance(value, dict):  # is_dict, spelled so the type checker sees it
            self._dict(value, indent + "  ", depth)
        else:
            self._list(value, indent + "  ", depth)
        self.lines.append(f"{indent}{'}' if is_dict else ']'}")

    def _dict(self, obj: dict, indent: str, depth: int) -> None:
        """Objects show their first keys; a map of records (every value an object, as in
        ``{model_name: {...}}``) is sampled like an array, since its keys are really data."""
        keys = list(obj)
        values = list(obj.values())
        records = len(keys) > SAMPLES + 2 and all(isinstance(v, dict) for v in values)
        limit = SAMPLES if records else self.lv.max_keys
        rest = []
        for i, k in enumerate(keys):
            if str(k) in self.keep:
                self.lines.append(f"{indent}{_key(k)}: {_full(obj[k])}")
            elif i < limit or (records and _looks_failed(obj[k])):
                self._node(obj[k], indent, f"{_key(k)}: ", depth + 1)
            else:
                rest.append(k)
        if rest:
            if records:  # the keys are the records' ids: all of them, within the id budget
                names = self._ids_in_line([_key(k) for k in rest])
            else:
                names = clip_line(", ".join(_key(k) for k in rest), 160)
            if records:
                shape = _shape_note([obj[k] for k in rest])
                note = ", values of the same shape" if shape == "of the same shape" else f" {shape}"
            else:
                same = len(rest) > 1 and _same_shape(obj[k] for k in rest)
                note = " (values of the same shape)" if same else ""
            self.lines.append(f"{indent}… {len(rest):,} more keys{note}: {names}")
            for k in rest:
                self._rescue(obj[k], indent, f".{k}")

    def _list(self, items: list, indent: str, depth: int) -> None:
        n = len(items)
        shown = list(range(min(n, SAMPLES)))
        flagged = [i for i in range(SAMPLES, n) if _looks_failed(items[i])][:MAX_FLAGGED]
        shown += flagged
        for pos, i in enumerate(shown):
            prefix = "" if pos == i else f"[{i}] "
            self._node(items[i], indent, prefix, depth + 1)
        rest = n - len(shown)
        if rest <= 0:
            return
        kept_failed = f"; {len(flagged)} failure-looking items shown" if flagged else ""
        self.lines.append(f"{indent}… {rest:,} more items {_shape_note(items)}{kept_failed}")
        shown_set = set(shown)
        self._id_table(items, [i for i in range(n) if i not in shown_set], indent)
        if self.keep:
            shown_set = set(shown)
            for i in range(n):
                if i not in shown_set:
                    self._rescue(items[i], indent, f"[{i}]")

    def _more(self, n: int) -> str:
        handle = f" (id={self.entry_id}: expand it for all)" if self.entry_id else ""
        return f"… {n:,} more{handle}"

    def _ids_in_line(self, names: list[str]) -> str:
        out, used = [], 0
        for j, name in enumerate(names):
            used += len(name) + 2
            if used > self.id_chars:
                out.append(self._more(len(names) - j))
                break
            out.append(name)
        self.id_chars = max(0, self.id_chars - used)
        return ", ".join(out)

    def _id_table(self, items: list, hidden: list[int], indent: str) -> None:
        """The id-like fields of every hidden row that is an object, one line per row, within
        the rendering's id budget; then how many more, with the id to expand."""
        rows = [i for i in hidden if isinstance(items[i], dict)]
        cols = id_columns(items[i] for i in rows[:ID_SAMPLE])
        if not cols:
            return
        self.lines.append(f"{indent}their {' | '.join(_key(k) for k in cols)}:")
        for j, i in enumerate(rows):
            line = f"{indent}[{i}] " + " | ".join(_cell(items[i].get(k)) for k in cols)
            if len(line) + 1 > self.id_chars:
                self.lines.append(f"{indent}{self._more(len(rows) - j)}")
                self.id_chars = 0
                return
            self.id_chars -= len(line) + 1
            self.lines.append(line)

    def _rescue(self, value: Any, indent: str, base: str) -> None:
        """keep_keys hidden in a folded or skipped part still show their full value."""
        if not self.keep:
            return
        for path, found in _find_keys(value, self.keep, base):
            self.lines.append(f"{indent}↳ {path}: {_full(found)}")


def id_like(key: Any) -> bool:
    """``id``, ``uuid``, ``name``, ``path``, … or a key ending in one (``user_id``, ``userId``,
    ``file-path``): what names a row for the next call."""
    k = str(key)
    low = k.lower()
    if low in _ID_NAMES:
        return True
    for suffix in _ID_SUFFIXES:
        if len(k) > len(suffix) and low.endswith(suffix):
            cut = len(k) - len(suffix)
            if k[cut - 1] in "_-." or (k[cut].isupper() and k[cut - 1].islower()):
                return True
    return False


def id_columns(rows: Iterable[dict]) -> list[str]:
    """The id-like keys with a scalar value in at least half of ``rows``, first seen first."""
    seen: dict[str, int] = {}
    n = 0
    for row in rows:
        n += 1
        for k, v in row.items():
            if id_like(k) and (v is None or isinstance(v, (str, int, float))):
                seen[k] = seen.get(k, 0) + 1
    return [k for k, c in seen.items() if c * 2 >= n][:MAX_ID_COLUMNS]


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    s = str(v) if not isinstance(v, bool) else json.dumps(v)
    if "|" in s or "\n" in s or not s:
        s = json.dumps(s, ensure_ascii=False)
    return clip_line(s, MAX_ID_CHARS)


def _find_keys(value: Any, keep: frozenset[str], base: str) -> list[tuple[str, Any]]:
    """Iterative (data may be deep) and alias-safe (YAML anchors share objects)."""
    found: list[tuple[str, Any]] = []
    stack: list[tuple[str, Any]] = [(base, value)]
    seen: set[int] = set()
    while stack:
        path, v = stack.pop()
        if isinstance(v, dict):
            if id(v) in seen:
                continue
            seen.add(id(v))
            children = []
            for k, x in v.items():
                p = f"{path}.{k}"
                if str(k) in keep:
                    found.append((p.lstrip("."), x))
                else:
                    children.append((p, x))
            stack.extend(reversed(children))
        elif isinstance(v, list):
            if id(v) in seen:
                continue
            seen.add(id(v))
            stack.extend(reversed([(f"{path}[{i}]", x) for i, x in enumerate(v)]))
    return found


def _has_keep_key(value: Any, keep: frozenset[str]) -> bool:
    return bool(_find_keys(value, keep, ""))


def _key(k: Any) -> str:
    s = str(k)
    return s if _BARE_KEY.match(s) else json.dumps(s, ensure_ascii=False)


def _scalar(v: Any, max_str: int) -> str:
    if isinstance(v, str):
        if len(v) > max_str:
            keep = max(8, max_str - 16)
            return json.dumps(v[:keep], ensure_ascii=False)[:-1] + f'…" (+{len(v) - keep:,} chars)'
        return json.dumps(v, ensure_ascii=False)
    if v is None or isinstance(v, (bool, int, float)):
        try:
            return json.dumps(v)
        except ValueError:  # an int too long to print (Python's digit limit)
            return "<huge number>"
    if isinstance(v, (bytes, bytearray)):
        return f"<{len(v):,} bytes>"
    return _scalar(str(v), max_str)  # datetimes, dates, YAML sets and other exotic values


def _inline(value: Any, limit: int, max_str: int) -> str | None:
    """Compact one-line form, or None as soon as it exceeds ``limit`` (so the cost is bounded)."""
    if limit <= 2:
        return None
    if isinstance(value, dict):
        parts = []
        used = 2
        for k, v in value.items():
            inner = _inline(v, limit - used, max_str)
            if inner is None:
                return None
            part = f"{_key(k)}: {inner}"
            used += len(part) + 2
            if used > limit:
                return None
            parts.append(part)
        return "{" + ", ".join(parts) + "}"
    if isinstance(value, list):
        parts = []
        used = 2
        for v in value:
            inner = _inline(v, limit - used, max_str)
            if inner is None:
                return None
            used += len(inner) + 2
            if used > limit:
                return None
            parts.append(inner)
        return "[" + ", ".join(parts) + "]"
    s = _scalar(value, max_str)
    return s if len(s) <= limit else None


def _full(value: Any) -> str:
    """A keep_keys value: all of it, compact, up to a sanity cap (YAML alias bombs exist)."""
    out: list[str] = []
    size = 0
    try:
        for chunk in json.JSONEncoder(ensure_ascii=False, default=str).iterencode(value):
            out.append(chunk)
            size += len(chunk)
            if size > MAX_FULL_CHARS:
                return "".join(out)[:MAX_FULL_CHARS] + f"…[clipped at {MAX_FULL_CHARS:,} chars]"
    except (RecursionError, ValueError):
        return "".join(out)[:MAX_FULL_CHARS] + "…[too deeply nested to show in full]"
    return "".join(out)


def _shape(v: Any) -> tuple:
    if isinstance(v, dict):
        return ("object", frozenset(str(k) for k in v))
    if isinstance(v, list):
        return ("array",)
    if isinstance(v, str):
        return ("string",)
    if isinstance(v, bool):
        return ("boolean",)
    if isinstance(v, (int, float)):
        return ("number",)
    if v is None:
        return ("null",)
    return (type(v).__name__,)


def _same_shape(values: Iterable[Any]) -> bool:
    first = None
    for v in values:
        s = _shape(v)
        if first is None:
            first = s
        elif s != first:
            return False
    return True


def _shape_note(items: list) -> str:
    kinds: dict[str, int] = {}
    keysets: set[frozenset] = set()
    for v in items:
        s = _shape(v)
        kinds[s[0]] = kinds.get(s[0], 0) + 1
        if s[0] == "object":
            keysets.add(s[1])
    if len(kinds) == 1 and len(keysets) <= 1:
        return "of the same shape"
    if len(kinds) == 1:
        return f"(objects with {len(keysets):,} different key sets; {_key_census(items)})"
    mix = ", ".join(f"{n:,} {k}" for k, n in sorted(kinds.items(), key=lambda kv: -kv[1]))
    return f"(shapes differ: {mix})"


def _key_census(items: list) -> str:
    """When records differ, which keys they carry (and how often) is the schema worth knowing."""
    freq: dict[str, int] = {}
    for v in items:
        for k in v:
            freq[str(k)] = freq.get(str(k), 0) + 1
    ranked = sorted(freq.items(), key=lambda kv: -kv[1])
    return clip_line("keys: " + ", ".join(f"{_key(k)} {n:,}" for k, n in ranked), 400)


def _looks_failed(item: Any) -> bool:
    if not isinstance(item, dict):
        return False
    for k, v in item.items():
        if isinstance(v, str) and str(k).lower() in _STATUS_KEYS and _FAILURE_WORDS.match(v):
            return True
    return False


# --- CSV -------------------------------------------------------------------------------------


def _csv_delimiter(lines: list[str]) -> str | None:
    sample = lines[:20]
    if len(sample) < 2:
        return None
    for delim in (",", "\t", ";", "|"):
        try:
            widths = {len(r) for r in csv.reader(sample, delimiter=delim)}
        except csv.Error:
            continue
        if len(widths) == 1 and widths.pop() >= 2:
            return delim
    return None


@dataclass
class _Table:
    """A parsed CSV; tables are not trees, so they have their own rendering."""

    rows: list[list[str]]
    delim: str

    @classmethod
    def parse(cls, body: str) -> "_Table":
        lines = [x for x in body.splitlines()[:40] if x.strip()]
        delim = _csv_delimiter(lines) or ("\t" if "\t" in body[:2000] else ",")
        try:
            rows = [r for r in csv.reader(io.StringIO(body), delimiter=delim) if r]
        except csv.Error as err:
            raise _Unparsed from err
        if len(rows) < 2:
            raise _Unparsed
        return cls(rows, delim)

    def render(self, entry_id: str | None = None) -> tuple[str, str]:
        header, data = self.rows[0], self.rows[1:]
        buf = io.StringIO()
        writer = csv.writer(buf, delimiter=self.delim, lineterminator="\n")
        for row in [header] + data[:SAMPLES]:
            writer.writerow([clip_line(c, 120) for c in row])
        lines = [clip_line(x, 400) for x in buf.getvalue().splitlines()]
        if len(data) > SAMPLES:
            lines.append(f"… {len(data) - SAMPLES:,} more rows")
            lines += _csv_ids(header, data[SAMPLES:], SAMPLES + 1, entry_id)
        if len(data) <= CSV_SUMMARY_ROWS:
            lines.append(clip_line("columns: " + " | ".join(_column_summaries(header, data)), 1200))
        summary = f"{len(data):,} rows × {len(header)} columns; header + {SAMPLES} rows kept"
        return "\n".join(lines), summary


def _csv_ids(header: list[str], rows: list[list[str]], first: int, entry_id: str | None) -> list:
    """The id-like columns of the rows not shown, one line a row within ``ID_CHARS``."""
    cols = [c for c, name in enumerate(header) if id_like(name.strip())][:MAX_ID_COLUMNS]
    if not cols:
        return []
    out = ["their " + " | ".join(header[c].strip() for c in cols) + ":"]
    spare = ID_CHARS
    for j, row in enumerate(rows):
        line = f"[{first + j}] " + " | ".join(_cell(row[c] if c < len(row) else None) for c in cols)
        spare -= len(line) + 1
        if spare < 0:
            handle = f" (id={entry_id}: expand it for all)" if entry_id else ""
            out.append(f"… {len(rows) - j:,} more{handle}")
            break
        out.append(line)
    return out


def _column_summaries(header: list[str], data: list[list[str]]) -> list[str]:
    out = []
    for c, name in enumerate(header[:40]):
        values = [r[c].strip() for r in data if c < len(r)]
        filled = [v for v in values if v]
        empty = len(values) - len(filled)
        desc = _column_type(filled)
        if empty:
            desc += f", {empty:,} empty"
        out.append(f"{clip_line(name, 40)} {desc}")
    if len(header) > 40:
        out.append(f"… {len(header) - 40} more columns")
    return out


def _column_type(values: list[str]) -> str:
    if not values:
        return "empty"
    for kind, conv in (("int", int), ("float", float)):
        try:
            nums = [conv(v) for v in values]
        except ValueError:
            continue
        return f"{kind} {min(nums):g}..{max(nums):g}"
    distinct = len(set(values[:10_000]))
    return f"text, {distinct:,}{'+' if len(values) > 10_000 else ''} distinct"


# --- textual fallback ------------------------------------------------------------------------


def _text_fold(body: str) -> tuple[str, str]:
    s = body.lstrip()
    if s.startswith(("{", "[")):
        return _bracket_fold(body, LEVELS[0].depth, LEVELS[0].max_str)
    return _indent_fold(body)


_FOLD_TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"|[\[\]{}]|,')


def _bracket_fold(body: str, max_depth: int, max_str: int) -> tuple[str, str]:
    """Unparsable JSON-ish text: everything nested deeper than ``max_depth`` becomes a count.
    One regex pass over strings and brackets, no recursion, so 10,000 levels are no problem."""
    fold_depth = max_depth + 2  # ``depth`` counts open brackets, so the root container is 1
    out: list[str] = []
    last = 0
    depth = 0
    fold_start = -1
    commas = 0
    folds = 0
    for m in _FOLD_TOKEN.finditer(body):
        tok = m.group(0)
        if tok[0] == '"':
            if fold_start < 0 and len(tok) > max_str + 2:
                out.append(body[last : m.start()])
                out.append(_scalar(_unquote(tok), max_str))
                last = m.end()
        elif tok in "[{":
            depth += 1
            if depth == fold_depth and fold_start < 0:
                out.append(body[last : m.start()])
                fold_start, commas = m.start(), 0
        elif tok in "]}":
            if fold_start >= 0 and depth == fold_depth:
                filled = bool(body[fold_start + 1 : m.start()].strip())
                out.append(_fold_text(body[fold_start], commas + 1 if filled else 0))
                last = m.end()
                fold_start = -1
                folds += 1
            depth = max(depth - 1, 0)
        elif fold_start >= 0 and depth == fold_depth:
            commas += 1
    if fold_start >= 0:
        out.append(f"{body[fold_start]}… truncated …")
        folds += 1
    else:
        out.append(body[last:])
    text = "\n".join(clip_line(x) for x in "".join(out).splitlines())
    return text, f"not parseable; {folds:,} containers nested beyond {max_depth} folded by brackets"


def _fold_text(opener: str, n: int) -> str:
    return f"{{… {n:,} keys …}}" if opener == "{" else f"[… {n:,} items …]"


def _unquote(tok: str) -> str:
    try:
        return json.loads(tok)
    except (json.JSONDecodeError, RecursionError):
        return tok[1:-1]


def _indent_fold(body: str) -> tuple[str, str]:
    """Indented text no parser took (broken YAML, yarn.lock, INI-ish dumps): the indentation is
    the tree. Runs of sibling blocks keep two samples and name the rest; blocks nested deeper than
    the first levels fold to a line count; every line is clipped."""
    out: list[str] = []
    counts = {"blocks": 0, "deep": 0}
    _fold_lines([x for x in body.splitlines() if x.strip()], 0, out, counts)
    summary = (
        f"not parseable; {counts['blocks']:,} repeated blocks and {counts['deep']:,} deeply"
        " indented lines folded by indentation, lines clipped"
    )
    return "\n".join(out), summary


def _indent_of(line: str) -> int:
    return len(line) - len(line.lstrip())


def _fold_lines(lines: list[str], depth: int, out: list[str], counts: dict[str, int]) -> None:
    if not lines:
        return
    base = min(_indent_of(x) for x in lines)
    groups: list[list[str]] = []
    for line in lines:
        if _indent_of(line) <= base or not groups:
            groups.append([line])
        else:
            groups[-1].append(line)
    i = 0
    while i < len(groups):
        j = i
        while j < len(groups) and len(groups[j]) > 1:
            j += 1
        if j == i:  # a lone line
            out.append(clip_line(groups[i][0]))
            i += 1
            continue
        run = groups[i:j]
        shown = run if len(run) <= SAMPLES + 2 else run[:SAMPLES]
        for group in shown:
            out.append(clip_line(group[0]))
            if depth >= LEVELS[0].depth:
                pad = " " * _indent_of(group[1])
                out.append(f"{pad}… {len(group) - 1:,} deeper lines")
                counts["deep"] += len(group) - 1
            else:
                _fold_lines(group[1:], depth + 1, out, counts)
        rest = run[len(shown) :]
        if rest:
            names = clip_line(", ".join(g[0].strip().rstrip(":") for g in rest), 300)
            pad = " " * _indent_of(rest[0][0])
            out.append(f"{pad}… {len(rest):,} more blocks like these: {names}")
            counts["blocks"] += len(rest)
        i = j


# --- facts -----------------------------------------------------------------------------------


def _missing_facts(original: str, rendered: str) -> list[str]:
    """Error codes, test ids, exceptions and file:line references must outlive any folding."""
    flat = " ".join(rendered.split())
    missing: list[str] = []
    seen: set[str] = set()
    for fact in _facts(original):
        if fact in seen:
            continue
        seen.add(fact)
        if fact not in flat:
            missing.append(fact)
            if len(missing) >= MAX_FACTS:
                break
    return missing


def _facts(text: str) -> Iterable[str]:
    for m in _CODE_RE.finditer(text):
        yield m.group(0)
    for m in _EXC_RE.finditer(text):
        yield " ".join(m.group(0).split())
    for m in _PATH_ANCHOR.finditer(text):
        start = m.start()
        floor = max(0, start - 300)
        while start > floor and text[start - 1] in _PATH_CHARS:
            start -= 1
        token = text[start : m.end()]
        if start < m.start() and not token.startswith("//"):
            yield token

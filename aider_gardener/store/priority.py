"""How much an entry is worth keeping in context, and for how long it is worth keeping at all.

The score decides eviction order (lowest first) and breaks ties in recall. It is

    base(class) + recency bonus + reference bonus - staleness

The base is what a class of text is usually worth later: the user's prompts and errors most,
bulky logs least. Recency (up to +20, halving every 30 minutes since created or last accessed)
and references (+10 per later mention of the entry's paths, identifiers, error codes or id,
capped, fading hourly) say it is still in use; staleness (-5 per day, capped) sinks week-old
logs below everything from today. An error whose file was later edited successfully decays
``RESOLVED_DECAY`` times faster; pinned entries never decay. Scores are recomputed by the
maintenance thread (one UPDATE through the ``gardener_priority`` SQL function) and whenever an
entry is touched. Why each term and weight: docs/decisions/091-priority-and-eviction.md.
"""

from __future__ import annotations

import math
import re
import sqlite3

BASE: dict[str, float] = {
    "prompt": 90.0,
    "error": 80.0,
    "code": 60.0,
    "prose": 40.0,
    "structured": 30.0,
    "log": 20.0,
    "edit": 30.0,
}
DEFAULT_BASE = 30.0

RECENCY_MAX = 20.0
RECENCY_HALF_LIFE = 30 * 60.0
REFERENCE_STEP = 10.0
REFERENCE_MAX = 30.0
REFERENCE_HALF_LIFE = 60 * 60.0
STALENESS_PER_DAY = 5.0
STALENESS_MAX = 40.0
RESOLVED_DECAY = 4.0

DAY = 86400.0

# Time to live after the last access, per class (None = keep until forgotten). Logs go stale
# fastest and are the bulk of the store; prompts are the user's intent and are kept.
DEFAULT_TTL: dict[str, float | None] = {
    "log": 3 * DAY,
    "structured": 7 * DAY,
    "edit": 14 * DAY,
    "prose": 14 * DAY,
    "code": 30 * DAY,
    "error": 30 * DAY,
    "prompt": None,
}


def score(
    cls: str,
    *,
    created: float,
    last_access: float | None,
    now: float,
    pinned: bool = False,
    refs: int = 0,
    last_ref: float | None = None,
    resolved_at: float | None = None,
) -> float:
    """The priority of one entry at time ``now`` (see the module docstring for the formula)."""
    base = BASE.get(str(cls), DEFAULT_BASE)
    ref_bonus = min(REFERENCE_MAX, REFERENCE_STEP * max(0, refs or 0))
    if pinned:
        return base + RECENCY_MAX + ref_bonus
    touched = max(created, last_access or created)
    age = max(0.0, now - touched)
    if resolved_at is not None:
        age += (RESOLVED_DECAY - 1.0) * max(0.0, now - max(resolved_at, touched))
    recency = RECENCY_MAX * math.pow(0.5, age / RECENCY_HALF_LIFE)
    if ref_bonus and last_ref is not None:
        ref_bonus *= math.pow(0.5, max(0.0, now - last_ref) / REFERENCE_HALF_LIFE)
    staleness = min(STALENESS_MAX, STALENESS_PER_DAY * age / DAY)
    return max(0.0, base + recency + ref_bonus - staleness)


def _sql_score(cls, created, last_access, now, pinned, refs, last_ref, resolved_at) -> float:
    return score(
        cls,
        created=created,
        last_access=last_access,
        now=now,
        pinned=bool(pinned),
        refs=refs or 0,
        last_ref=last_ref,
        resolved_at=resolved_at,
    )


SQL_FUNCTION = "gardener_priority"


def register(conn: sqlite3.Connection) -> None:
    """Make ``gardener_priority(cls, created, last_access, now, pinned, refs, last_ref,
    resolved_at)`` callable from SQL, so re-scoring thousands of rows is one statement."""
    conn.create_function(SQL_FUNCTION, 8, _sql_score)


# --- What an entry can be referred to by -------------------------------------------------------

_EXT = (
    "py|pyi|js|jsx|ts|tsx|mjs|cjs|go|rs|java|kt|kts|scala|c|h|cc|cpp|cxx|hpp|hh|cs|rb|php|swift|m|"
    "mm|sh|bash|zsh|ps1|lua|pl|r|jl|ex|exs|erl|hs|ml|clj|dart|vue|svelte|css|scss|less|html|htm|"
    "md|rst|txt|json|jsonl|yaml|yml|toml|ini|cfg|conf|xml|gradle|sql|proto|lock|mk|cmake|tf|ipynb"
)
_EXTENSIONS = frozenset(_EXT.split("|"))
# Runs of path characters that contain a "." or "/"; classified in Python, which is several
# times faster than one regex that must backtrack over every word of a log.
_PATHISH = re.compile(r"(?<![\w.~/-])[\w~-]*+[./][\w.~/-]*")
_CODE_IDENT = re.compile(
    r"\b(?=_*[A-Za-z])(?=__\w|\w*?(?:[a-z0-9][A-Z]|[A-Z]{2}[a-z]|[A-Za-z0-9]_[A-Za-z0-9]))"
    r"[A-Za-z_]\w{3,}\b"
)
_CAMEL_IDENT = re.compile(r"\b(?=\w*?(?:[a-z0-9][A-Z]|[A-Z]{2}[a-z]))[A-Za-z_]\w{3,}\b")
_ERROR_CODE = re.compile(r"\b[A-Z]{1,4}\d{3,5}\b")
_HANDLE = re.compile(r"\bid=([a-z2-7]{10})\b")
_SPLIT_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")

MAX_KEYS = 200


def normalize_path(path: str) -> str:
    """Paths are compared without ``./``, ``a/``/``b/`` diff prefixes, backslashes or case."""
    p = path.strip().replace("\\", "/").lower()
    while p.startswith("./"):
        p = p[2:]
    if p.startswith(("a/", "b/")) and p.count("/") > 1:
        p = p[2:]
    return p.rstrip("/")


def path_keys(path: str) -> list[str]:
    """A path is named by its full form and by its file name (messages rarely repeat the
    directory); both become keys."""
    p = normalize_path(path)
    if not p:
        return []
    base = p.rsplit("/", 1)[-1]
    return [p] if base == p else [p, base]


def extract_keys(text: str, limit: int = MAX_KEYS) -> list[str]:
    """Paths, code identifiers (snake_case, camelCase, dunder), error codes and handle ids named
    in ``text``: the words by which a later message can refer to it. Plain English words are not
    keys (every message would reference every entry). Lower-cased, at most ``limit``."""
    out: dict[str, None] = {}

    def add(key: str) -> bool:
        if key and key not in out:
            out[key] = None
        return len(out) >= limit

    for m in _HANDLE.finditer(text) if "id=" in text else ():
        if add(m.group(1)):
            return list(out)
    for m in _PATHISH.finditer(text):
        if text[m.start() - 1 : m.start()] == ":" or m.group(0).startswith("//"):
            continue  # URLs ("https://host/x") are not files of the project
        raw = m.group(0).rstrip(".-~")
        if not _is_path(raw):
            continue
        for key in path_keys(raw):
            if add(key):
                return list(out)
    for m in _ERROR_CODE.finditer(text):
        if add(m.group(0).lower()):
            return list(out)
    for m in _CODE_IDENT.finditer(text):
        if add(m.group(0).lower()):
            return list(out)
    return list(out)


def _is_path(token: str) -> bool:
    """``src/app.py``, ``/usr/lib/x``, ``README.md``: a token with a ``/`` and a letter, or a
    file name with a known extension (so ``3.14``, ``e.g`` and ``pkg.module`` are not)."""
    if not any(ch.isalpha() for ch in token):
        return False
    if "/" in token:
        return token.strip("/") != "" and "//" not in token
    base, dot, ext = token.rpartition(".")
    return bool(dot and base) and ext.lower() in _EXTENSIONS


def handle_ids(text: str) -> list[str]:
    """Entry ids cited by handle lines (``[full output stored: id=...]``) in ``text``."""
    return list(dict.fromkeys(m.group(1) for m in _HANDLE.finditer(text)))


def camel_terms(text: str, limit: int = 500) -> str:
    """``ContextPressure`` -> ``context pressure``: the words inside camelCase identifiers, so a
    natural-language query finds the code that spells them joined. unicode61 already splits
    snake_case and paths on their punctuation; camelCase is the one convention it cannot see."""
    seen: dict[str, None] = {}
    for m in _CAMEL_IDENT.finditer(text):
        word = m.group(0)
        parts = " ".join(p.lower() for p in _SPLIT_CAMEL.findall(word))
        if parts and parts not in seen:
            seen[parts] = None
            if len(seen) >= limit:
                break
    return "\n".join(seen)


def paths_match(a: str, b: str) -> bool:
    """True when two spellings name the same file: equal after normalizing, or one is a suffix
    of the other on a ``/`` boundary (``src/app.py`` vs ``/home/me/proj/src/app.py``)."""
    a, b = normalize_path(a), normalize_path(b)
    if not a or not b:
        return False
    if a == b:
        return True
    short, long_ = (a, b) if len(a) < len(b) else (b, a)
    return long_.endswith("/" + short)

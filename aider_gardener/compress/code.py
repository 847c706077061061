"""Code compressor: a tree-sitter skeleton that keeps what a model navigates by and folds the rest.

A file's interface (imports, signatures, decorators, type definitions, module-level names) is what
an LLM needs to keep working with code it has seen; bodies can be recalled from the store. So
every function body becomes ``… N lines …``, containers keep their members' signatures and long
statements their first line. Hot code (``opts.hot``: recently edited or mentioned) and lines
carrying critical facts are never folded.

The grammars are tree-sitter-language-pack's, as Aider's repo map uses, and the rules are phrased
over node-kind names (``function``, ``class``, ``body`` ...), not per-language tables, so every
language Aider maps gets a skeleton. Without a grammar, or when the parse is mostly ERROR nodes or
outruns its time budget, indentation folding takes over. Fold markers do not parse, so a text
that already carries them is returned unchanged: compressing twice is a no-op.

Decision record: docs/decisions/013-code-skeletons.md
"""

from __future__ import annotations

import bisect
import re
import textwrap
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Iterable, Sequence

from ..tokens import count_tokens
from ..types import Compressed, CompressOptions
from .base import MAX_LINE_CHARS, clip_line, strip_ansi

# Inputs shorter than this are cheaper to keep than to describe.
MIN_LINES = 15
# A fold must hide at least this many lines, or it saves nothing over the marker.
MIN_FOLD = 2
# Non-definition statements (calls, assignments, control flow) longer than this keep only their
# first line (and closing bracket); type definitions get more room because their fields are the
# interface. Imports are always kept.
STATEMENT_KEEP = 6
STATEMENT_KEEP_TIGHT = 2
TYPE_KEEP = 40
# Comment and docstring runs longer than this keep only their first line with words in it.
COMMENT_KEEP = 3
# A statement that keeps more than this many lines after its inner bodies were folded (a big
# literal with a few callbacks in it) is folded as a whole instead.
STATEMENT_REMAIN = 30
# A function whose body is most of the input and that is anonymous (IIFE, ``describe(...)``, UMD)
# or defines functions itself (a React page component) is a wrapper, not a body to hide: its
# statements are skeletonised instead (inside a named one, statements longer than
# STATEMENT_KEEP_TIGHT keep their first line).
WRAPPER_FRACTION = 0.5
WRAPPER_MIN_LINES = 60
# Containers and wrappers nest this deep at most before their insides are kept as they are.
MAX_DEPTH = 60
# More than this share of non-blank lines inside ERROR nodes means the grammar does not fit.
ERROR_FRACTION = 0.3
# Indentation folding keeps the outermost levels holding at most this share of the lines.
INDENT_KEEP_FRACTION = 0.35
DOCSTRING_CHARS = 120
# Past this size tree-sitter parsing costs more than it is worth; indentation folding is linear.
MAX_PARSE_CHARS = 2_000_000
# Past this size a badly parsing input gets no second grammar.
MAX_RETRY_CHARS = 200_000
# A parse's time budget (see _parse): real code parses at ~0.25 us per byte.
PARSE_BUDGET_S = 0.25
PARSE_BUDGET_US_PER_BYTE = 2
# More than this share of replacement or control characters: decoded binary, not code.
JUNK_FRACTION = 0.02

FOLD_RE = re.compile(r"… \d+ lines …|…\[\+\d+ chars\]…")

_FUNC_RE = re.compile(
    r"function|method|constructor|destructor|lambda|closure|arrow|func_literal|subroutine"
    r"|procedure|accessor_declaration|modifier_definition|fallback_receive"
)
_FUNC_EXCLUDE_RE = re.compile(
    r"signature|declarator|call|invocation|_type$|parameter|modifier$|_body$|_list$|clause|_name$"
    r"|reference|capture|specifier|initializer|constraint|suffix|index|table_constructor"
)
_CONTAINER_RE = re.compile(
    r"class|interface|struct|impl_item|trait|namespace|contract|enum|protocol|extension|record"
    r"|union|mod_item|^module$|module_declaration|module_definition|object_declaration"
    r"|library_declaration"
)
_CONTAINER_EXCLUDE_RE = re.compile(
    r"_body$|_list$|clause|heritage|pattern|_expression$|literal|_name$|identifier|variable"
    r"|storage|parameter|bound|_type$|assignment|constant|access|import|export|directive|member"
    r"|entry|case|value|invocation|constraint|initializer|requirement|fragment|alias|superclass"
    r"|^super|extends|implements|static_block|_body_declarations"
)
# Style sheets: a rule's declarations are its body, at-rules hold rules.
_EXTRA_FUNCS = frozenset({"rule_set", "keyframe_block"})
_EXTRA_CONTAINERS = frozenset({"media_statement", "supports_statement", "keyframes_statement"})
_BODY_TYPES = ("body", "block", "declaration_list", "compound_statement", "body_statement")
_TYPE_KIND_RE = re.compile(
    r"type_(declaration|definition|alias|item|spec)|struct|enum|interface|union|typedef"
)
_IMPORT_KIND_RE = re.compile(
    r"import|include|use_declaration|using_directive|package_clause|package_declaration|require"
    r"|extern_crate"
)
_NAME_KINDS = frozenset(
    {
        "identifier",
        "field_identifier",
        "property_identifier",
        "type_identifier",
        "simple_identifier",
        "name",
        "constant",
        "operator_name",
        "destructor_name",
        "qualified_identifier",
        "private_property_identifier",
    }
)
_DO_CONTAINERS = frozenset(
    {b"defmodule", b"defprotocol", b"defimpl", b"describe", b"context", b"module", b"class"}
)
_CLOSER_RE = re.compile(r"^\s*(?:[)\]}]|end\b|fi\b|esac\b|done\b)")
_OPENERS = (b"{", b"(", b"[")

# Languages whose grammar has no definitions to skeletonise: indentation says more.
_INDENT_LANGS = frozenset(
    {
        "markdown",
        "markdown_inline",
        "json",
        "yaml",
        "toml",
        "xml",
        "html",
        "csv",
        "tsv",
        "psv",
        "rst",
        "org",
        "vue",
        "svelte",
        "astro",
        "latex",
        "bibtex",
        "gitcommit",
        "gitignore",
        "gitattributes",
        "po",
        "properties",
        "ini",
        "requirements",
        "twig",
        "embeddedtemplate",
        "dtd",
        "pem",
        "text",
        "diff",
    }
)

# Fence info strings and extensions that are not file names grep-ast knows.
_ALIASES = {
    "py": "python",
    "py3": "python",
    "python3": "python",
    "pyi": "python",
    "pyw": "python",
    "ipython": "python",
    "sage": "python",
    "js": "javascript",
    "jsx": "javascript",
    "mjs": "javascript",
    "cjs": "javascript",
    "node": "javascript",
    "nodejs": "javascript",
    "javascriptreact": "javascript",
    "ts": "typescript",
    "mts": "typescript",
    "cts": "typescript",
    "typescriptreact": "tsx",
    "sh": "bash",
    "shell": "bash",
    "zsh": "bash",
    "shellscript": "bash",
    "golang": "go",
    "rs": "rust",
    "h": "c",
    "c++": "cpp",
    "cxx": "cpp",
    "cc": "cpp",
    "hpp": "cpp",
    "hh": "cpp",
    "cs": "csharp",
    "c#": "csharp",
    "c_sharp": "csharp",
    "kt": "kotlin",
    "kts": "kotlin",
    "rb": "ruby",
    "sol": "solidity",
    "ex": "elixir",
    "exs": "elixir",
    "hs": "haskell",
    "ml": "ocaml",
    "pl": "perl",
    "pm": "perl",
    "ps1": "powershell",
    "pwsh": "powershell",
    "yml": "yaml",
    "md": "markdown",
    "tf": "hcl",
    "terraform": "hcl",
    "protobuf": "proto",
    "gql": "graphql",
    "jl": "julia",
    "clj": "clojure",
    "erl": "erlang",
    "objective-c": "objc",
    "objectivec": "objc",
    "makefile": "make",
    "docker": "dockerfile",
    "htm": "html",
    "svg": "xml",
    "patch": "diff",
    "udiff": "diff",
    "txt": "text",
    "plain": "text",
    "plaintext": "text",
    "console": "text",
    "output": "text",
    "log": "text",
    "shell-session": "text",
    "pycon": "text",
}
# When the first grammar parses badly, these are worth one more parse (mislabelled fences, TS
# files with JSX, C headers with C++ in them).
_ALTERNATES = {
    "typescript": ("tsx",),
    "tsx": ("typescript",),
    "javascript": ("tsx", "typescript"),
    "c": ("cpp",),
    "cpp": ("c",),
}


@dataclass
class _Plan:
    """Which line ranges (inclusive, 0-based) become fold markers."""

    folds: list[tuple[int, int]] = field(default_factory=list)
    indent_fallback: bool = False
    error_lines: int = 0


def compress_code(text: str, opts: CompressOptions) -> Compressed:
    """Skeletonise source code; see the module docstring for what survives."""
    original = text
    text = strip_ansi(text)
    lines = text.split("\n")
    n = len(lines) - (1 if text.endswith("\n") else 0)
    counts = {"lines": n}
    if not text.strip() or FOLD_RE.search(text) or _is_junk(text):
        # Empty, already a summary, or decoded binary (not code; the store keeps it as is).
        return Compressed(original, {**counts, "lines_out": n})

    hint = opts.source.path
    inner = _split_fence(lines)
    if inner is not None:
        head, body_lines, tail, info = inner
        hint = hint or info
    else:
        head, body_lines, tail = [], lines, []

    if len(body_lines) < MIN_LINES:
        plan = _Plan()
    else:
        plan = _plan(body_lines, hint, opts.hot)
        plan.folds = _spare_facts(body_lines, plan.folds)
    out_body = _render(body_lines, plan.folds)
    out_lines = [clip_line(x) for x in head] + out_body + [clip_line(x) for x in tail]
    out = "\n".join(out_lines)
    counts.update(
        lines_out=len(out_lines) - (1 if out.endswith("\n") else 0),
        folds=len(plan.folds),
        folded_lines=sum(e - s + 1 for s, e in plan.folds),
        indent_fallback=int(plan.indent_fallback),
        error_lines=plan.error_lines,
    )
    if out == original or not _shorter(out, original, opts.model):
        counts["lines_out"] = n
        return Compressed(original, counts)
    return Compressed(out, counts)


def _shorter(out: str, text: str, model: str) -> bool:
    if len(out) >= len(text):
        return False
    return count_tokens(out, model) < count_tokens(text, model)


# --------------------------------------------------------------------------- language detection


def detect_language(text: str, hint: str | None = None) -> str | None:
    """The tree-sitter language name for ``text``: from a path or fence info string when given
    (extension, file name, or language alias), else a cheap guess from the content."""
    lang = _lang_from_hint(hint) if hint else None
    return lang or guess_language(text)


def _lang_from_hint(hint: str) -> str | None:
    from grep_ast import filename_to_lang

    token = hint.strip().split()[0] if hint.strip() else ""
    token = token.strip("`{}").split(",")[0]  # ```{.python} and ```python,title=x
    if not token:
        return None
    lower = token.lower()
    if lower.endswith(".tsx") or lower in ("tsx",):
        return "tsx"
    try:
        lang = filename_to_lang(token)
    except Exception:  # noqa: BLE001 - an odd hint must not stop compression
        lang = None
    if lang:
        return _ALIASES.get(lang, lang)
    ext = lower.rsplit(".", 1)[-1] if "." in lower else None
    for key in (ext, lower.lstrip(".")):
        if key and key in _ALIASES:
            return _ALIASES[key]
    if lower in _INDENT_LANGS:
        return lower
    if "/" not in lower and "." not in lower and _language(lower) is not None:
        return lower
    return None


_SHEBANGS = (
    ("python", "python"),
    ("node", "javascript"),
    ("deno", "typescript"),
    ("bun", "typescript"),
    ("bash", "bash"),
    ("zsh", "bash"),
    ("/sh", "bash"),
    (" sh", "bash"),
    ("ruby", "ruby"),
    ("perl", "perl"),
    ("php", "php"),
    ("lua", "lua"),
)
_M = re.MULTILINE


class _Then:
    """``first`` and, after it, ``then``: two searches. One pattern with (?s:.*) between them
    rescans the rest of the text from every line ``first`` matches."""

    def __init__(self, first: re.Pattern[str], then: re.Pattern[str]):
        self.first, self.then = first, then

    def search(self, text: str) -> bool:
        m = self.first.search(text)
        return m is not None and self.then.search(text, m.end()) is not None


# Line starts are ^[^\S\n]*, not ^\s*: with re.M, \s* runs on over blank lines, so each line start
# of a run of blank lines rescans the rest of the run (quadratic in the run's length).
_GUESSES: tuple[tuple[str, re.Pattern[str] | _Then], ...] = (
    ("php", re.compile(r"<\?php")),
    (
        "solidity",
        re.compile(r"^[^\S\n]*pragma solidity|^[^\S\n]*contract \w+(\s+is\s+[\w, ]+)?\s*\{", _M),
    ),
    ("go", _Then(re.compile(r"^package \w+\s*$", _M), re.compile(r"^func ", _M))),
    (
        "rust",
        re.compile(
            r"^[^\S\n]*(pub(\([\w:]+\))? )?(async )?(unsafe )?fn \w+"
            r"|^[^\S\n]*impl(<[^>]*>)? [\w:<>, ]+\{"
            r"|^use [\w:]+(::\{[^}]*\})?;\s*$",
            _M,
        ),
    ),
    (
        "csharp",
        re.compile(
            r"^[^\S\n]*using System[\w.]*;|^[^\S\n]*namespace [\w.]+;\s*$|\[(HttpGet|Serializable)",
            _M,
        ),
    ),
    ("java", re.compile(r"^package [\w.]+;\s*$|^import java\.|\bpublic static void main\(", _M)),
    ("c", re.compile(r"^[^\S\n]*#\s*(include|define|ifndef|ifdef|pragma)\b", _M)),
    (
        "python",
        re.compile(
            r"^[^\S\n]*(async\s+)?def \w+\s*\(.*\)\s*(->\s*[^:]+)?:\s*(#.*)?$"
            r"|^[^\S\n]*class \w+(\(.*\))?:\s*$|^from [\w.]+ import \w"
            r"|^import [\w.]+(\s+as \w+)?\s*$"
            r"|^if __name__ ==",
            _M,
        ),
    ),
    (
        "ruby",
        _Then(
            re.compile(r"^[^\S\n]*def \w+[?!]?(\(.*\))?\s*$", _M),
            re.compile(r"^[^\S\n]*end\s*$", _M),
        ),
    ),
    (
        "javascript",
        re.compile(
            r"^[^\S\n]*(export |import |const |let |var |(async )?function\b"
            r"|module\.exports|require\()"
            r"|=>",
            _M,
        ),
    ),
    ("java", re.compile(r"\bpublic (final |abstract )?(class|interface|enum|record) \w+")),
    ("kotlin", re.compile(r"^[^\S\n]*(fun|val|data class|object) \w+", _M)),
    (
        "bash",
        re.compile(r"^[^\S\n]*(if \[|fi$|for \w+ in .*; do|echo |export \w+=|\w+\(\) \{)", _M),
    ),
    ("lua", re.compile(r"^[^\S\n]*local (function )?\w+", _M)),
    (
        "css",
        _Then(
            re.compile(r"^[.#@:\w\[][^{;=()\n]*\{[ \t]*$", _M),
            re.compile(r"^[ \t]*[\w-]+[ \t]*:[^;\n]+;[ \t]*$", _M),
        ),
    ),
)
_TS_RE = re.compile(
    r"^[^\S\n]*(export\s+)?(declare\s+)?(interface|type|enum|namespace|abstract class)\s+\w+"
    r"|^[^\S\n]*import type\b|\b(const|let|var)\s+\w+\s*:\s*[\w<\[{]"
    r"|\)\s*:\s*(Promise<|string\b|number\b|boolean\b|void\b|any\b)"
    r"|\w\??:\s*(string|number|boolean|any|unknown)\b[;,)]"
    r"|\)\s*:\s*[\w.]+(<[\w<>, .\[\]|]*>)?(\[\])?\s*(\{|=>)\s*$",
    _M,
)
_JSX_RE = re.compile(r"<[A-Z]\w*[\s/>]|</[a-zA-Z][\w.]*>|^[^\S\n]*return \(\s*$", _M)
_CPP_RE = re.compile(
    r"\bstd::|^[^\S\n]*class \w+|\bnamespace \w+|\btemplate\s*<"
    r"|#include <(iostream|vector|string|memory"
    r"|map)>|\bpublic:|\bprivate:",
    _M,
)


def guess_language(text: str) -> str | None:
    """A cheap guess from shebangs and telltale lines; ``None`` when nothing looks like code."""
    sample = text[:20000]
    stripped = sample.lstrip()
    if stripped.startswith("#!"):
        first = stripped.split("\n", 1)[0]
        for key, lang in _SHEBANGS:
            if key in first:
                return lang
    for lang, pattern in _GUESSES:
        if pattern.search(sample):
            if lang == "c" and _CPP_RE.search(sample):
                return "cpp"
            if lang == "javascript" and _TS_RE.search(sample):
                return "tsx" if _JSX_RE.search(sample) else "typescript"
            return lang
    return None


# --------------------------------------------------------------------------- grammar access


@lru_cache(maxsize=None)
def _language(name: str):
    """A tree-sitter Language, or None when the pack has no such grammar."""
    try:
        from grep_ast.tsl import get_language

        return get_language(name)
    except Exception:  # noqa: BLE001 - LookupError, or a broken binding: no grammar either way
        return None


@lru_cache(maxsize=None)
def _kinds(name: str) -> tuple[frozenset[str], frozenset[str]] | None:
    """The language's function-like and container node kinds, chosen by name."""
    language = _language(name)
    if language is None:
        return None
    funcs, containers = set(), set()
    for i in range(language.node_kind_count):
        if not (language.node_kind_is_named(i) and language.node_kind_is_visible(i)):
            continue
        kind = language.node_kind_for_id(i)
        if kind in _EXTRA_FUNCS or (_FUNC_RE.search(kind) and not _FUNC_EXCLUDE_RE.search(kind)):
            funcs.add(kind)
        elif kind in _EXTRA_CONTAINERS or (
            _CONTAINER_RE.search(kind) and not _CONTAINER_EXCLUDE_RE.search(kind)
        ):
            containers.add(kind)
    return frozenset(funcs), frozenset(containers)


@lru_cache(maxsize=None)
def _queries(name: str):
    """(definitions query, ERROR query) for a language, compiled once."""
    from tree_sitter import Query

    language = _language(name)
    kinds = _kinds(name)
    if language is None or kinds is None:
        return None
    alts = " ".join(f"({k})" for k in sorted(kinds[0] | kinds[1]))
    defs = Query(language, f"[{alts}] @d") if alts else None
    errors = Query(language, "(ERROR) @e")
    return defs, errors


def _parse(name: str, source: bytes):
    """The tree, or None when the grammar is missing or parsing outran its budget.

    tree-sitter's error recovery is super-linear on some junk (text read in the wrong
    encoding), so a parse gets PARSE_BUDGET_S plus PARSE_BUDGET_US_PER_BYTE, about eight times
    what real code takes; past it the indentation plan is used, as for a grammar that does not
    fit. Time, not work, because py-tree-sitter 0.25's progress_callback (the
    deterministic way) crashes the process; timeout_micros is deprecated for it, not gone."""
    import warnings

    from tree_sitter import Parser

    language = _language(name)
    if language is None:
        return None
    parser = Parser(language)
    budget = PARSE_BUDGET_S * 1e6 + PARSE_BUDGET_US_PER_BYTE * len(source)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        parser.timeout_micros = int(budget)  # type: ignore[misc]  # deprecated, still settable
    try:
        return parser.parse(source)
    except ValueError:  # "Parsing failed": the budget ran out
        return None


def _captures(query, node) -> list:
    from tree_sitter import QueryCursor

    found = QueryCursor(query).captures(node)
    return [n for nodes in found.values() for n in nodes]


# --------------------------------------------------------------------------- planning


def _plan(lines: list[str], hint: str | None, hot: frozenset[str]) -> _Plan:
    """Skeleton folds from the best-fitting grammar, or indentation folds when none fits."""
    text = "\n".join(lines)
    hot_rows = _hot_rows(lines, hot)
    lang = detect_language(text, hint)
    if lang is None or lang in _INDENT_LANGS or len(text) > MAX_PARSE_CHARS:
        return _indent_plan(lines, hot, hot_rows)

    # Snippets are often cut out of a class or function: parse them dedented so the grammar sees
    # top-level code. Rows are unchanged, and rows are all the plan uses.
    first = next((x for x in lines if x.strip()), "")
    if first[:1] in (" ", "\t"):  # only then can every line share an indent
        text = textwrap.dedent(text)
    source = text.encode("utf-8", "surrogatepass")
    candidates = [lang]
    if len(text) <= MAX_RETRY_CHARS:
        candidates.extend(_ALTERNATES.get(lang, ()))
        guessed = guess_language(text)
        if guessed and guessed not in candidates and guessed not in _INDENT_LANGS:
            candidates.append(guessed)
    best = None
    for cand in candidates:
        if _queries(cand) is None:
            continue
        tree = _parse(cand, source)
        if tree is None:
            continue
        err = _error_rows(cand, tree.root_node) if tree.root_node.has_error else 0
        if best is None or err < best[2]:
            best = (cand, tree, err)
        if err == 0:
            break
    nonblank = sum(1 for x in lines if x.strip()) or 1
    if best is None or best[2] > ERROR_FRACTION * nonblank:
        plan = _indent_plan(lines, hot, hot_rows)
        plan.error_lines = best[2] if best else 0
        return plan
    cand, tree, err = best
    plan = _Skeleton(cand, tree.root_node, lines, hot, hot_rows).plan()
    plan.error_lines = err
    return plan


_JUNK_RE = re.compile("[\ufffd\x00-\x08\x0e-\x1f\x7f]")


def _is_junk(text: str) -> bool:
    """Decoded binary (replacement characters, control bytes) is not worth a parse: grammars
    crawl through it making ERROR nodes."""
    sample = text[:100_000]
    return len(_JUNK_RE.findall(sample)) > JUNK_FRACTION * len(sample)


def _error_rows(lang: str, root) -> int:
    """Rows covered by ERROR nodes (outermost only, so nested errors count once)."""
    queries = _queries(lang)
    if queries is None:
        return 0
    spans = sorted((_rows(n) for n in _captures(queries[1], root)), key=lambda r: (r[0], -r[1]))
    total, reach = 0, -1
    for start, end in spans:
        if end <= reach:
            continue
        total += end - max(start, reach + 1) + 1
        reach = end
    return total


def _hot_rows(lines: Sequence[str], hot: frozenset[str]) -> list[int]:
    wanted = {h.strip() for h in hot if h.strip()}
    if not wanted:
        return []
    return [i for i, line in enumerate(lines) if line.strip() in wanted]


def _rows(node) -> tuple[int, int]:
    """First and last row a node occupies (a node ending at column 0 ends on the row before)."""
    start, end = node.start_point[0], node.end_point[0]
    if end > start and node.end_point[1] == 0:
        end -= 1
    return start, end


class _Skeleton:
    """Walks the top level and container members, deciding folds; never enters folded bodies."""

    def __init__(self, lang: str, root, lines: list[str], hot: frozenset[str], hot_rows):
        funcs, containers = _kinds(lang) or (frozenset(), frozenset())
        self.funcs, self.containers = funcs, containers
        self.root = root
        self.lines = lines
        self.total = len(lines)
        self.hot_names = {h.strip() for h in hot if h.strip() and "\n" not in h}
        self.hot_rows = hot_rows
        self.hot_words = {h for h in self.hot_names if re.fullmatch(r"[\w.$:]+", h)}
        queries = _queries(lang)
        self.defs_query = queries[0] if queries else None
        self.folds: list[tuple[int, int]] = []
        self.tight = 0

    def plan(self) -> _Plan:
        self._walk(self.root.named_children, ())
        return _Plan(_clean_folds(self.folds, self.hot_rows))

    # -- levels

    def _walk(self, nodes: Iterable, scope: tuple[str, ...], depth: int = 0) -> None:
        run: list = []
        for node in nodes:
            if self._is_comment(node):
                if run and node.start_point[0] > _rows(run[-1])[1] + 1:
                    self._fold_comment_run(run)
                    run = []
                run.append(node)
                continue
            if run:
                self._fold_comment_run(run)
                run = []
            self._statement(node, scope, depth)
        if run:
            self._fold_comment_run(run)

    def _statement(self, node, scope: tuple[str, ...], depth: int = 0) -> None:
        kind = node.type
        if kind in self.funcs:
            body = _body(node)
            if body is not None:
                self._function(node, body, scope, depth)
                return
        if kind in self.containers:
            body = _body(node)
            if body is not None:
                self._container(node, body, scope, depth)
                return
        if _IMPORT_KIND_RE.search(kind):
            return
        if kind == "function_body":  # Dart: the body is the signature's sibling
            self._function(node, node, scope, depth)
            return
        if kind == "call" and self._do_block_call(node, scope, depth):
            return
        if kind.startswith(("preproc_if", "preproc_else", "preproc_elif")):
            # Conditional compilation wraps whole sections of C files: look inside.
            cond = node.child_by_field_name("condition") or node.child_by_field_name("name")
            children = (c for c in node.named_children if cond is None or c.id != cond.id)
            self._walk(children, scope, depth + 1)
            return
        start, end = _rows(node)
        inner = self._outermost_defs(node)
        if depth < MAX_DEPTH and self._is_wrapper(start, end):
            # Most of the input: an ERROR node, ``extern "C" {``, ``describe(..., () => {``,
            # ``module.exports = {...}``. Look inside rather than fold it all away.
            body = _body(node)
            covered = sum(_rows(d)[1] - _rows(d)[0] + 1 for d in inner)
            if kind == "ERROR" or body is not None or covered > WRAPPER_FRACTION * (end - start):
                self._walk((body or node).named_children, scope, depth + 1)
                return
        mark = len(self.folds)
        if inner and depth < MAX_DEPTH:
            for child in inner:
                self._statement(child, scope, depth + 1)
            folded = sum(e - s + 1 for s, e in self.folds[mark:])
            if (end - start + 1) - folded <= STATEMENT_REMAIN:
                return
            del self.folds[mark:]
        if _TYPE_KIND_RE.search(kind):
            limit = TYPE_KEEP
        else:
            limit = STATEMENT_KEEP_TIGHT if self.tight else STATEMENT_KEEP
        if end - start + 1 <= limit or self._is_hot_span(start, end):
            return
        if self.hot_words and self.hot_words & _words(self.lines[start]):
            return
        last = end - 1 if end > start and _CLOSER_RE.match(self.lines[end]) else end
        self._add(start + 1, last)

    def _function(self, node, body, scope: tuple[str, ...], depth: int) -> None:
        name = _name_of(node)
        start, end = _rows(node)
        if self._is_hot_name(name, scope) or self._is_hot_span(start, end):
            return
        bstart, bend = _rows(body)
        if (
            depth < MAX_DEPTH
            and self._is_wrapper(bstart, bend)
            and (name is None or len(self._outermost_defs(body)) >= 2)
        ):
            # A named function this big that defines functions of its own is acting as a module
            # (a React page with its handlers and effects): its statements are the skeleton,
            # kept to their first lines.
            self.tight += name is not None
            self._walk(_members(body), scope, depth + 1)
            self.tight -= name is not None
            return
        first, last = self._interior(node, body)
        doc = self._docstring_row(body)
        if doc is not None and first <= doc <= last:
            self._add(first, doc - 1)
            self._add(doc + 1, last)
        else:
            self._add(first, last)

    def _container(self, node, body, scope: tuple[str, ...], depth: int) -> None:
        name = _name_of(node)
        if self._is_hot_name(name, scope) or depth >= MAX_DEPTH:
            return
        self._walk(_members(body), scope + ((name,) if name else ()), depth + 1)

    def _do_block_call(self, node, scope: tuple[str, ...], depth: int) -> bool:
        """Elixir and Ruby define with calls: ``defmodule X do`` holds definitions, ``def f do``
        and any other ``... do ... end`` block is a body."""
        block = next((c for c in node.named_children if c.type == "do_block"), None)
        if block is None:
            return False
        head = node.named_children[0].text or b""
        if head in _DO_CONTAINERS:
            self._container(node, block, scope, depth)
        else:
            self._function(node, block, scope, depth)
        return True

    def _is_wrapper(self, start: int, end: int) -> bool:
        return self.total >= WRAPPER_MIN_LINES and end - start + 1 > WRAPPER_FRACTION * self.total

    # -- helpers

    def _outermost_defs(self, node) -> list:
        """Definitions strictly inside ``node`` that no other such definition contains. Queried
        per statement, and only for statements long enough to hold a foldable body: most
        statements are one-liners, so this is far cheaper than querying the whole tree."""
        start, end = _rows(node)
        if self.defs_query is None or end - start < MIN_FOLD + 1:
            return []
        found = _captures(self.defs_query, node)
        found.sort(key=lambda n: (n.start_byte, -n.end_byte))
        out = []
        reach = -1
        for d in found:
            if d.start_byte < reach or d.id == node.id:
                continue
            out.append(d)
            reach = d.end_byte
        return out

    def _interior(self, node, body) -> tuple[int, int]:
        """The rows of a body strictly inside its delimiters, plus any comments between the
        signature and the body (tree-sitter leaves those outside an indented block)."""
        bstart, bend = _rows(body)
        text = body.text or b""
        if text.startswith(_OPENERS) or body.type == "do_block":
            first = bstart + 1
            last = bend - 1 if _CLOSER_RE.match(self.lines[bend]) else bend
            return first, last
        header_end = node.start_point[0]
        for child in node.children:
            if child.start_byte >= body.start_byte:
                break
            if "comment" not in child.type:
                header_end = child.end_point[0]
        if header_end < bstart:
            return header_end + 1, bend
        return bstart + 1, bend

    def _docstring_row(self, body) -> int | None:
        """The row of a Python-style docstring's first line with words in it, if short."""
        first = body.named_children[0] if body.named_child_count else None
        if first is None or not _is_docstring(first):
            return None
        start, end = _rows(first)
        for row in range(start, min(end, start + 1) + 1):
            line = self.lines[row].strip() if row < self.total else ""
            if re.search(r"[A-Za-z0-9]", line.strip("\"'rRbBuUfF")):
                return row if len(line) <= DOCSTRING_CHARS else None
        return None

    def _is_comment(self, node) -> bool:
        if "comment" in node.type:
            return True
        return _is_docstring(node)

    def _fold_comment_run(self, run: list) -> None:
        start, end = _rows(run[0])[0], _rows(run[-1])[1]
        limit = 1 if self.tight else COMMENT_KEEP
        if end - start + 1 <= limit or self._is_hot_span(start, end):
            return
        keep = start
        for row in range(start, end + 1):
            if re.search(r"[A-Za-z0-9]", self.lines[row]):
                keep = row
                break
        self._add(start, keep - 1)
        self._add(keep + 1, end)

    def _is_hot_name(self, name: str | None, scope: tuple[str, ...]) -> bool:
        if not name or not self.hot_names:
            return False
        if name in self.hot_names:
            return True
        return any(f"{outer}.{name}" in self.hot_names for outer in scope if outer)

    def _is_hot_span(self, start: int, end: int) -> bool:
        i = bisect.bisect_left(self.hot_rows, start)
        return i < len(self.hot_rows) and self.hot_rows[i] <= end

    def _add(self, start: int, end: int) -> None:
        if end - start + 1 < MIN_FOLD:
            return
        chars = sum(len(self.lines[r]) for r in range(start, end + 1))
        if chars <= 2 * len(_marker(self.lines, start, end)):
            return
        self.folds.append((start, end))


def _is_docstring(node) -> bool:
    """A bare string statement (depending on the grammar version, wrapped in an
    expression_statement or not) at the start of a body, or at module or class level."""
    if node.type == "expression_statement" and node.named_child_count == 1:
        node = node.named_children[0]
    return node.type in ("string", "concatenated_string")


def _body(node):
    body = node.child_by_field_name("body")
    if body is not None:
        return body
    for child in node.named_children:
        if child.type.endswith(_BODY_TYPES) or child.type == "statement_block":
            return child
    return None


def _members(body) -> list:
    """The statements of a body (Ruby wraps them once more, in a body_statement)."""
    children = body.named_children
    if len(children) == 1 and children[0].type == "body_statement":
        return children[0].named_children
    return children


def _name_of(node) -> str | None:
    """A definition's name: its ``name`` field, a C declarator's identifier, or for anonymous
    functions the variable, property or key they are assigned to."""
    name = node.child_by_field_name("name")
    if name is None:
        decl = node.child_by_field_name("declarator")
        for _ in range(8):
            if decl is None or decl.type in _NAME_KINDS:
                break
            decl = decl.child_by_field_name("declarator") or decl.child_by_field_name("name")
        name = decl
    if name is None and node.parent is not None:
        parent = node.parent
        for fname in ("name", "left", "key", "property"):
            cand = parent.child_by_field_name(fname)
            if cand is not None and cand.id != node.id:
                name = cand
                break
    if name is None or name.text is None:
        return None
    return name.text.decode("utf-8", "replace")


def _clean_folds(folds: list[tuple[int, int]], hot_rows: Sequence[int]) -> list[tuple[int, int]]:
    """Sorted, non-overlapping, and none hiding a hot line."""
    out: list[tuple[int, int]] = []
    reach = -1
    for start, end in sorted(folds):
        if start <= reach or end < start:
            continue
        i = bisect.bisect_left(hot_rows, start)
        if i < len(hot_rows) and hot_rows[i] <= end:
            continue
        out.append((start, end))
        reach = end
    return out


# Lines no compressor may drop (see tests/critical_facts.py): error codes, exception lines,
# failing test ids and ``file.ext:line`` references. Rare in source, but code pasted into a tool
# output or a chat message carries them.
_FACT_RE = re.compile(
    r"\b(?:E\d{4}|TS\d{4,5}|CS\d{4})\b"
    r"|^[ \t]*(?:E[ \t]+)?(?:[A-Za-z_][\w$]*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Failure)"
    r"(?::[ \t]*\S[^\n]*)?[ \t]*$"
    r"|^[ \t]*(?:FAILED|ERROR)[ \t]+\S+::|--- FAIL: |\.\.\. FAILED"
    r"|[\w-]\.(?:py|pyx|js|jsx|mjs|ts|tsx|go|rs|java|kt|c|h|cc|cpp|hpp|cs|rb|php|swift|scala|sol"
    r"|vue|svelte|sh|lua|ex|exs|dart)[:(]\d",
    re.MULTILINE,
)


def _spare_facts(lines: list[str], folds: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Split folds around fact lines so those lines stay; pieces too small to fold stay too."""
    if not folds:
        return folds
    text = "\n".join(lines)
    starts = [0]
    for line in lines[:-1]:
        starts.append(starts[-1] + len(line) + 1)
    rows = sorted({bisect.bisect_right(starts, m.start()) - 1 for m in _FACT_RE.finditer(text)})
    if not rows:
        return folds
    out = []
    for start, end in folds:
        i = bisect.bisect_left(rows, start)
        while i < len(rows) and rows[i] <= end:
            row = rows[i]
            if row - start >= MIN_FOLD:
                out.append((start, row - 1))
            start = row + 1
            i += 1
        if end - start + 1 >= MIN_FOLD:
            out.append((start, end))
    return out


# --------------------------------------------------------------------------- indentation fallback


def _indent_plan(lines: list[str], hot: frozenset[str], hot_rows: list[int]) -> _Plan:
    """Keep the outermost indentation levels (as many as fit in INDENT_KEEP_FRACTION of the
    lines, at least one), fold runs of deeper lines. A run right under a line that names a hot
    identifier, or containing a hot line, stays."""
    widths = [_indent_width(x) if x.strip() else -1 for x in lines]
    per_level = Counter(w for w in widths if w >= 0)
    levels = sorted(per_level)
    nonblank = sum(per_level.values())
    if len(levels) < 2:
        return _Plan(indent_fallback=True)
    threshold = levels[0]
    kept = per_level[threshold]
    for level in levels[1:]:
        kept += per_level[level]
        if kept > INDENT_KEEP_FRACTION * nonblank:
            break
        threshold = level
    words = {h.strip() for h in hot if re.fullmatch(r"[\w.$:]+", h.strip())}
    deep = [w > threshold for w in widths]
    # Blank lines join a run only when deeper lines surround them.
    prev_deep = False
    for i, w in enumerate(widths):
        if w >= 0:
            prev_deep = deep[i]
        elif prev_deep:
            j = i + 1
            while j < len(widths) and widths[j] < 0:
                j += 1
            deep[i] = j < len(widths) and deep[j]
    folds = []
    i = 0
    while i < len(lines):
        if not deep[i]:
            i += 1
            continue
        j = i
        while j + 1 < len(lines) and deep[j + 1]:
            j += 1
        header = lines[i - 1] if i > 0 else ""
        if not (words and words & _words(header)):
            folds.append((i, j))
        i = j + 1
    folds = [
        (s, e)
        for s, e in folds
        if e - s + 1 >= MIN_FOLD
        and sum(len(lines[r]) for r in range(s, e + 1)) > 2 * len(_marker(lines, s, e))
    ]
    return _Plan(_clean_folds(folds, hot_rows), indent_fallback=True)


def _words(line: str) -> set[str]:
    """Identifiers and dotted names in a line, to match hot identifiers against."""
    return set(re.findall(r"[\w$]+", line)) | set(re.findall(r"[\w$]+(?:\.[\w$]+)+", line))


def _indent_width(line: str) -> int:
    stripped = line.lstrip(" \t")
    return len(line[: len(line) - len(stripped)].expandtabs(4))


# --------------------------------------------------------------------------- output


def _marker(lines: Sequence[str], start: int, end: int) -> str:
    indent = ""
    for row in range(start, end + 1):
        if lines[row].strip():
            line = lines[row]
            indent = line[: len(line) - len(line.lstrip())]
            break
    return f"{indent}… {end - start + 1} lines …"


def _render(lines: list[str], folds: list[tuple[int, int]]) -> list[str]:
    """Kept lines (clipped), a marker per fold, and no more than one blank line in a row."""
    out: list[str] = []
    fold_at = {s: e for s, e in folds}
    i = 0
    blank = False
    last = len(lines) - 1
    while i <= last:
        if i in fold_at:
            end = fold_at[i]
            out.append(_marker(lines, i, end))
            i = end + 1
            blank = False
            continue
        line = lines[i]
        is_blank = not line.strip()
        if not (is_blank and blank and folds and i != last):
            out.append(clip_line(line) if len(line) > MAX_LINE_CHARS else line)
        blank = is_blank
        i += 1
    return out


# --------------------------------------------------------------------------- fences


_FENCE_RE = re.compile(r"^\s*(```+|~~~+)\s*([^`\s]*)")


def _split_fence(lines: list[str]) -> tuple[list[str], list[str], list[str], str] | None:
    """``(head, body, tail, info)`` for a fenced block (optionally preceded by a path line, as in
    Aider's whole-file edits); None when the text is not one fenced block."""
    first = 0
    while first < len(lines) and not lines[first].strip():
        first += 1
    if first >= len(lines):
        return None
    info_path = None
    m = _FENCE_RE.match(lines[first])
    if m is None and first + 1 < len(lines):
        candidate = lines[first].strip()
        m2 = _FENCE_RE.match(lines[first + 1])
        if m2 and candidate and " " not in candidate and len(candidate) < 200:
            info_path, first, m = candidate, first + 1, m2
    if m is None:
        return None
    fence = m.group(1)
    last = len(lines) - 1
    while last > first and not lines[last].strip():
        last -= 1
    if last <= first or not lines[last].strip().startswith(fence[:3]):
        return None
    if lines[last].strip().strip(fence[0]):
        return None
    info = info_path or m.group(2)
    return lines[: first + 1], lines[first + 1 : last], lines[last:], info

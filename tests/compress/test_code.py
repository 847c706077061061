"""The code compressor on real source: Python, JavaScript and C shipped in installed packages, and
code fences from real Aider chat histories (read at test time, never copied).

Signatures are checked against an independent oracle where one exists (Python's own ``ast``) and
against plain regexes over the original otherwise.
"""

from __future__ import annotations

import ast
import importlib.util
import random
import re
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import aider_gardener  # noqa: F401  (offline switches before tiktoken)
from aider_gardener import tokens
from aider_gardener.compress import code as code_module
from aider_gardener.compress.base import clip_line
from aider_gardener.compress.code import (
    FOLD_RE,
    MIN_LINES,
    compress_code,
    detect_language,
    guess_language,
)
from aider_gardener.tokens import count_tokens
from aider_gardener.types import CompressOptions, Source
from tests.hang import finishes

TARGET_RATIO = 0.35


def _site_file(package: str, rel: str) -> Path | None:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / rel
    return path if path.is_file() else None


def _read_site(package: str, rel: str) -> str:
    path = _site_file(package, rel)
    if path is None:
        pytest.skip(f"{package}/{rel} not installed")
    return path.read_text(encoding="utf-8", errors="replace")


def _opts(path: str | None = None, hot=()) -> CompressOptions:
    return CompressOptions(source=Source(path=path), hot=frozenset(hot))


def _ratio(before: str, after: str) -> float:
    return count_tokens(after) / count_tokens(before)


def _assert_invariants(text: str, path: str | None = None, hot=()) -> str:
    """Never longer (chars and tokens), idempotent, and returns the output."""
    out = compress_code(text, _opts(path, hot)).text
    assert len(out) <= len(text)
    if out != text:  # (tiktoken is very slow on decoded random bytes, which come back as is)
        assert count_tokens(out) <= count_tokens(text)
    assert compress_code(out, _opts(path, hot)).text == out
    return out


# --------------------------------------------------------------------------- real Python

PY_FILES = [
    ("aider", "coders/base_coder.py"),
    ("aider", "repomap.py"),
    ("aider", "commands.py"),
    ("aider", "io.py"),
    ("networkx", "classes/graph.py"),
    ("networkx", "algorithms/shortest_paths/weighted.py"),
]


def _py_skeleton_lines(text: str) -> list[str]:
    """What must survive, according to ``ast``: imports, module-level assignments, and for every
    top-level function and class and every method, its decorators and full signature."""
    lines = text.splitlines()
    want: list[str] = []

    def definition(node) -> None:
        want.extend(lines[d.lineno - 1] for d in node.decorator_list)
        first_body = node.body[0].lineno - 1
        for row in range(node.lineno - 1, first_body):
            line = lines[row]
            if line.strip() and not line.lstrip().startswith("#"):
                want.append(line)
            if line.rstrip().endswith(":") and _closes_signature(lines, node, row):
                break

    defs = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    for node in ast.parse(text).body:
        if isinstance(node, defs):
            definition(node)
            if isinstance(node, ast.ClassDef):
                for sub in node.body:
                    if isinstance(sub, defs):
                        definition(sub)
        elif isinstance(node, (ast.Import, ast.ImportFrom, ast.Assign, ast.AnnAssign)):
            want.append(lines[node.lineno - 1])
    return want


def _closes_signature(lines, node, row) -> bool:
    """The signature ends on the row where the header parses as a complete ``def``."""
    header = "\n".join(lines[node.lineno - 1 : row + 1]).strip()
    try:
        ast.parse(textwrap.dedent(header) + "\n    pass\n")
        return True
    except SyntaxError:
        return False


@pytest.mark.parametrize("package,rel", PY_FILES, ids=[r for _, r in PY_FILES])
def test_python_signatures_survive_and_ratio(package, rel):
    text = _read_site(package, rel)
    out = _assert_invariants(text, rel)
    kept = set(out.splitlines())
    missing = [x for x in _py_skeleton_lines(text) if clip_line(x) not in kept]
    assert not missing, missing[:10]
    assert FOLD_RE.search(out)
    assert _ratio(text, out) <= TARGET_RATIO


def test_python_first_docstring_line_is_kept():
    text = _read_site("networkx", "classes/graph.py")
    out = compress_code(text, _opts("graph.py")).text
    tree = ast.parse(text)
    graph = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Graph")
    lines = text.splitlines()
    checked = 0
    for fn in graph.body:
        doc = ast.get_docstring(fn) if isinstance(fn, ast.FunctionDef) else None
        if not doc:
            continue
        first = lines[fn.body[0].lineno - 1]
        if len(first.strip()) > 5 and len(first.strip()) <= 120:
            assert first in out.splitlines(), first
            checked += 1
    assert checked >= 10


# --------------------------------------------------------------------------- hot code


def _function(text: str, cls: str, name: str) -> tuple[int, int]:
    tree = ast.parse(text)
    klass = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
    fn = next(n for n in klass.body if isinstance(n, ast.FunctionDef) and n.name == name)
    return fn.lineno, fn.end_lineno


@pytest.mark.parametrize("hot", ["get_ranked_tags", "RepoMap.get_ranked_tags"])
def test_hot_function_keeps_its_body(hot):
    text = _read_site("aider", "repomap.py")
    start, end = _function(text, "RepoMap", "get_ranked_tags")
    body = [x for x in text.splitlines()[start - 1 : end] if x.strip()]
    cold = compress_code(text, _opts("repomap.py")).text.splitlines()
    warm = compress_code(text, _opts("repomap.py", [hot])).text.splitlines()
    assert not set(body) <= set(cold)
    assert set(body) <= set(warm)
    # Only that function: its neighbours are still folded.
    assert len(warm) < len(text.splitlines()) // 2


def test_hot_line_keeps_the_function_containing_it():
    text = _read_site("aider", "repomap.py")
    start, end = _function(text, "RepoMap", "token_count")
    lines = text.splitlines()
    body = [x for x in lines[start:end] if x.strip()]
    hot_line = next(x for x in body if lines.count(x) == 1 and len(x.strip()) > 20)
    out = compress_code(text, _opts("repomap.py", [hot_line.strip()])).text.splitlines()
    assert set(body) <= set(out)
    assert hot_line not in compress_code(text, _opts("repomap.py")).text.splitlines()


def test_hot_identifier_in_js_and_indentation_fallback():
    js = "\n".join(
        f"function handler{i}(req, res) {{\n  const a = {i};\n  const b = a * 2;\n"
        f"  res.send(a + b);\n  return b;\n}}\n"
        for i in range(6)
    )
    out = compress_code(js, _opts("app.js", ["handler3"])).text
    assert "  const a = 3;" in out and "  const a = 2;" not in out
    nested = "\n".join(
        f"section{i}:\n    alpha {i}\n    beta {i}\n    gamma {i}\n    delta {i}" for i in range(6)
    )
    out = compress_code(nested, _opts("notes.unknownext", ["section2"])).text
    assert "    alpha 2" in out and "    alpha 1" not in out


# --------------------------------------------------------------------------- real JS and C

JS_FILES = [
    ("sklearn", "utils/_repr_html/estimator.js"),
    ("torch", "utils/model_dump/code.js"),
]
C_FILES = [
    ("markupsafe", "_speedups.c"),
    ("websockets", "speedups.c"),
]
TOP_JS = re.compile(r"^(?:export\s+(?:default\s+)?)?(?:async\s+)?(?:function\*?\s+\w+|class\s+\w+)")
TOP_C_FUNC = re.compile(r"^[A-Za-z_][\w \t*]*\([^;]*$")


@pytest.mark.parametrize("package,rel", JS_FILES, ids=[r for _, r in JS_FILES])
def test_javascript_signatures_survive_and_ratio(package, rel):
    text = _read_site(package, rel)
    out = _assert_invariants(text, rel)
    kept = set(out.splitlines())
    want = [x for x in text.splitlines() if TOP_JS.match(x) or x.startswith("import ")]
    assert want
    assert [x for x in want if x not in kept] == []
    assert _ratio(text, out) <= TARGET_RATIO


@pytest.mark.parametrize("package,rel", C_FILES, ids=[r for _, r in C_FILES])
def test_c_function_headers_survive_and_ratio(package, rel):
    text = _read_site(package, rel)
    out = _assert_invariants(text, rel)
    kept = set(out.splitlines())
    lines = text.splitlines()
    # A C function definition: a column-0 header line followed (possibly after more parameter
    # lines) by a column-0 "{".
    headers = []
    for i, line in enumerate(lines):
        if TOP_C_FUNC.match(line) and not line.startswith(("#", "/", " ")):
            j = i
            while j + 1 < len(lines) and not lines[j].rstrip().endswith(("{", ";", ")")):
                j += 1
            if j + 1 < len(lines) and lines[j + 1].startswith("{"):
                headers.append(line)
    assert headers
    assert [h for h in headers if h not in kept] == []
    assert [x for x in lines if x.startswith("#include")] == [
        x for x in out.splitlines() if x.startswith("#include")
    ]
    assert _ratio(text, out) <= TARGET_RATIO


# --------------------------------------------------------------------------- chat history fences

FENCE_OPEN = re.compile(r"^```([\w+#.-]*)\s*$")
SEARCH_REPLACE = re.compile(
    r"^<<<<<<< SEARCH[^\n]*\n(.*?)^=======[ \t]*\n(.*?)^>>>>>>> REPLACE", re.S | re.M
)


def _fenced_code(histories: Path, min_lines: int) -> list[tuple[str, str, str]]:
    """(file, info string, code) for every fenced block in the histories; for SEARCH/REPLACE
    blocks, the REPLACE side (new code, often whole new files)."""
    found = []
    for path in sorted(histories.glob("*.md")):
        info, buf = None, []
        for line in path.read_text(encoding="utf-8", errors="replace").split("\n"):
            if info is None:
                m = FENCE_OPEN.match(line)
                if m:
                    info, buf = m.group(1), []
            elif line.rstrip() == "```":
                body = "\n".join(buf) + "\n"
                parts = [m.group(2) for m in SEARCH_REPLACE.finditer(body)] or [body]
                for part in parts:
                    if part.count("\n") >= min_lines and "<<<<<<<" not in part:
                        found.append((path.name, info, part))
                info = None
            else:
                buf.append(line)
    return found


@pytest.fixture(scope="module")
def fences(histories_dir):
    """(file, info, code, language, compressed) for every fenced block, compressed once."""
    out = []
    for name, info, code in _fenced_code(histories_dir, MIN_LINES):
        hint = info or None
        out.append(
            (name, info, code, detect_language(code, hint), compress_code(code, _opts(hint)))
        )
    return out


def test_history_fences_never_grow_and_are_idempotent(fences):
    assert len(fences) > 300
    for name, info, code, _, done in fences:
        again = compress_code(done.text, _opts(info or None)).text
        shorter = done.text == code or count_tokens(done.text) <= count_tokens(code)
        assert len(done.text) <= len(code) and shorter and again == done.text, (name, info)


CODE_LANGS = ("python", "typescript", "tsx", "javascript", "jsx", "csharp")


def test_history_fences_ratio_per_language(fences):
    """Whole-file-sized blocks (>= 40 lines) of the common languages reach the target ratio in
    aggregate, per language."""
    totals: dict[str, list[int]] = {}
    for _, _, code, lang, done in fences:
        if code.count("\n") < 40 or lang not in CODE_LANGS:
            continue
        acc = totals.setdefault(lang, [0, 0])
        acc[0] += count_tokens(code)
        acc[1] += count_tokens(done.text)
    assert {"python", "javascript", "typescript"} <= set(totals)
    ratios = {lang: out / inp for lang, (inp, out) in totals.items()}
    assert all(r <= TARGET_RATIO for r in ratios.values()), ratios


TOP_TS = re.compile(
    r"^(?:export\s+(?:default\s+)?)?(?:declare\s+)?(?:async\s+)?"
    r"(?:function\*?\s+\w+|(?:abstract\s+)?class\s+\w+|interface\s+\w+|enum\s+\w+)"
)


def test_history_fences_keep_top_level_declarations(fences):
    """Top-level declarations of JS/TS blocks and Python definitions (by ``ast``) survive."""
    checked = 0
    for name, info, code, lang, done in fences:
        out = set(done.text.splitlines())
        if lang == "python":
            try:
                want = _py_skeleton_lines(code)
            except SyntaxError:
                continue
        elif lang in ("javascript", "typescript", "tsx"):
            want = [x for x in code.splitlines() if TOP_TS.match(x)]
        else:
            continue
        missing = [x for x in want if clip_line(x) not in out]
        assert not missing, (name, info, missing[:5])
        checked += bool(want)
    assert checked > 100


# --------------------------------------------------------------------------- synthetic shapes


def test_short_snippet_is_unchanged():
    snippet = "def f(x):\n    y = x + 1\n    z = y * 2\n    return z\n"
    assert compress_code(snippet, _opts("a.py")).text == snippet


def test_fenced_block_keeps_fences_and_uses_info_string():
    body = "".join(
        f"def fn{i}(a, b):\n    c = a + b\n    d = c * 2\n    e = d - 1\n    return e\n\n"
        for i in range(5)
    )
    fenced = f"src/tools.py\n```python\n{body}```\n"
    out = compress_code(fenced, _opts()).text
    lines = out.splitlines()
    assert lines[:2] == ["src/tools.py", "```python"] and lines[-1] == "```"
    assert all(f"def fn{i}(a, b):" in lines for i in range(5))
    assert "    c = a + b" not in lines and "    … 4 lines …" in lines


def test_wrapper_callbacks_are_skeletonised():
    """``describe(... () => {...})`` is most of a test file: its ``it`` cases stay visible."""
    cases = "".join(
        f"  it('case {i}', () => {{\n    const v = compute({i});\n    expect(v).toBe({i});\n"
        f"    expect(v + 1).toBe({i + 1});\n  }});\n\n"
        for i in range(15)
    )
    text = f"import {{ compute }} from './compute';\n\ndescribe('compute', () => {{\n{cases}}});\n"
    out = compress_code(text, _opts("compute.test.js")).text.splitlines()
    assert all(f"  it('case {i}', () => {{" in out for i in range(15))
    assert "    const v = compute(3);" not in out


def test_react_page_component_keeps_state_and_handlers():
    handlers = "".join(
        f"  const handle{i} = async (event) => {{\n    event.preventDefault();\n"
        f"    await save{i}(state);\n    setState(null);\n  }};\n\n"
        for i in range(8)
    )
    jsx = "".join(f"      <Item key={{{i}}} onClick={{handle{i % 8}}} />\n" for i in range(30))
    text = (
        "import React, { useState } from 'react';\n\n"
        "export default function Page({ user }: Props) {\n"
        "  const [state, setState] = useState(null);\n\n"
        f"{handlers}  return (\n    <div>\n{jsx}    </div>\n  );\n}}\n"
    )
    out = compress_code(text, _opts("page.tsx")).text.splitlines()
    assert "export default function Page({ user }: Props) {" in out
    assert "  const [state, setState] = useState(null);" in out
    assert all(f"  const handle{i} = async (event) => {{" in out for i in range(8))
    assert "    await save3(state);" not in out
    assert not any("<Item key={4}" in x for x in out)


@pytest.mark.parametrize(
    "path,text,signatures,body_line",
    [
        (
            "main.go",
            'package main\n\nimport "fmt"\n\ntype Point struct {\n\tX int\n\tY int\n}\n\n'
            + "".join(
                f"func (p Point) M{i}(k int) int {{\n\ta := p.X * k\n\tb := p.Y * k\n"
                f"\tfmt.Println(a, b)\n\treturn a + b\n}}\n\n"
                for i in range(4)
            ),
            ["func (p Point) M0(k int) int {", "type Point struct {", "\tX int"],
            "\ta := p.X * k",
        ),
        (
            "lib.rs",
            "use std::fmt;\n\npub struct Acc {\n    total: i64,\n}\n\nimpl Acc {\n"
            + "".join(
                f"    pub fn add{i}(&mut self, v: i64) -> i64 {{\n        let w = v * 2;\n"
                f'        self.total += w;\n        println!("{{}}", w);\n        self.total\n'
                f"    }}\n\n"
                for i in range(4)
            )
            + "}\n",
            ["impl Acc {", "    pub fn add2(&mut self, v: i64) -> i64 {", "    total: i64,"],
            "        let w = v * 2;",
        ),
        (
            "Svc.java",
            "package app;\n\nimport java.util.List;\n\npublic class Svc {\n    private int n;\n\n"
            + "".join(
                f"    @Override\n    public int run{i}(List<Integer> xs) {{\n        int s = 0;\n"
                f"        for (int x : xs) {{ s += x; }}\n        n += s;\n        return s;\n"
                f"    }}\n\n"
                for i in range(4)
            )
            + "}\n",
            ["public class Svc {", "    @Override", "    public int run1(List<Integer> xs) {"],
            "        int s = 0;",
        ),
        (
            "Api.cs",
            "using System;\n\nnamespace App\n{\n    public class Api\n    {\n"
            + "".join(
                f"        [HttpGet]\n        public int Get{i}(int id)\n        {{\n"
                f"            var x = id * 2;\n            Console.WriteLine(x);\n"
                f"            return x;\n        }}\n\n"
                for i in range(4)
            )
            + "    }\n}\n",
            ["namespace App", "        [HttpGet]", "        public int Get3(int id)"],
            "            var x = id * 2;",
        ),
    ],
    ids=["go", "rust", "java", "csharp"],
)
def test_other_languages(path, text, signatures, body_line):
    out = _assert_invariants(text, path).splitlines()
    assert all(s in out for s in signatures), [s for s in signatures if s not in out]
    assert body_line not in out


# --------------------------------------------------------------------------- detection


@pytest.mark.parametrize(
    "hint,expected",
    [
        ("src/app.py", "python"),
        ("python", "python"),
        ("py", "python"),
        ("web/App.tsx", "tsx"),
        ("ts", "typescript"),
        ("jsx", "javascript"),
        ("C++", "cpp"),
        ("csharp", "csharp"),
        ("main.rs", "rust"),
        ("diff", "diff"),
        ("Dockerfile", "dockerfile"),
    ],
)
def test_language_from_hint(hint, expected):
    assert detect_language("", hint) == expected


@pytest.mark.parametrize(
    "text,expected",
    [
        ("#!/usr/bin/env python3\nprint('hi')\n", "python"),
        ("import os\n\ndef main() -> None:\n    pass\n", "python"),
        ('package main\n\nimport "fmt"\n\nfunc main() {\n}\n', "go"),
        ("use std::io;\n\nfn main() {\n    let x = 1;\n}\n", "rust"),
        ("const x = require('x');\nmodule.exports = x;\n", "javascript"),
        ("export interface User {\n  id: number;\n}\n", "typescript"),
        ("export function A(): JSX.Element {\n  return <Box />;\n}\n", "tsx"),
        ("package app;\n\npublic class A {\n}\n", "java"),
        ("#include <stdio.h>\nint main(void) { return 0; }\n", "c"),
        ("#include <vector>\nstd::vector<int> v;\n", "cpp"),
        ("using System;\n\nnamespace A;\n", "csharp"),
        ("// SPDX\npragma solidity ^0.8.0;\ncontract A {\n}\n", "solidity"),
        ("<?php\necho 1;\n", "php"),
        ("Just some words.\nNothing to see here.\n", None),
        ("class Greeter\n  def hello(name)\n    puts name\n  end\nend\n", "ruby"),
        (".card {\n  color: red;\n}\n", "css"),
        ("\n\n   \n\tdef   \n", None),
    ],
)
def test_guess_language(text, expected):
    assert guess_language(text) == expected


@pytest.mark.parametrize(
    "text, expected", [("\n" * 19_000 + "import os\n", "python"), (" \n" * 9_000, None)]
)
def test_guessing_the_language_of_blank_lines_does_not_hang(text, expected):
    """With re.M, ^\\s* ran on over blank lines: each line start rescanned the rest of the run."""
    assert finishes(guess_language, text) == expected


# --------------------------------------------------------------------------- fallbacks and junk


def test_unknown_language_folds_by_indentation():
    text = "\n".join(
        f"block {i} begin\n    step one {i}\n    step two {i}\n        detail {i}\n"
        f"    step three {i}"
        for i in range(8)
    )
    result = compress_code(text, _opts("notes.unknownext"))
    out = result.text.splitlines()
    assert result.counts["indent_fallback"] == 1
    assert all(f"block {i} begin" in out for i in range(8))
    assert "    step two 3" not in out and "    … 4 lines …" in out


def test_badly_parsing_code_falls_back_to_indentation():
    text = "\n".join(
        f"@@ {i} ((( [[ \n    ]]] {{ ::: {i}\n    ))) >>> {i}\n    <<< ]] {i}" for i in range(10)
    )
    result = compress_code(text, _opts("broken.py"))
    assert result.counts["error_lines"] > 0 and result.counts["indent_fallback"] == 1
    assert all(f"@@ {i} ((( [[ " in result.text.splitlines() for i in range(10))


def test_fact_lines_inside_bodies_survive():
    body = "".join(
        f"def f{i}():\n    a = {i}\n    b = a + 1\n    # see pkg/mod.py:{40 + i} and E0432\n"
        f"    c = b * 2\n    d = c - 1\n    return d\n\n"
        for i in range(5)
    )
    out = compress_code(body, _opts("m.py")).text
    assert all(f"pkg/mod.py:{40 + i}" in out for i in range(5))
    assert "    c = b * 2" not in out.splitlines()


def _half(text: str) -> str:
    return text[: len(text) // 2]


JUNK = {
    "random_bytes": bytes(random.Random(7).randrange(256) for _ in range(50_000)).decode(
        "utf-8", "replace"
    ),
    "megabyte_line": "x = 1; " * 150_000,
    "ansi": "\n".join(
        f"\x1b[31mdef f{i}():\x1b[0m\n    a = {i}\n    b = a\n    return b" for i in range(20)
    ),
    "empty": "",
    "blank": "\n\n   \n\t\n" * 10,
    "mismatched_braces": "function f() {\n  if (x) {\n    y();\n  }}\n}}\n" * 30,
    "deep_nesting": "x = " + "(" * 3000 + ")" * 3000 + "\n" * 20,
    "unclosed_blocks": "function f() {\n" + "  if (a) {\n    call();\n" * 500,
    "nul_bytes": "def f():\n\x00\x00  return 1\n" * 30,
    "crlf": "def f():\r\n    a = 1\r\n    b = 2\r\n    return a\r\n" * 10,
    "stray_markers": "def f():\n    x = '… 3 lines …'\n" + "    y = 1\n" * 30,
}


@pytest.mark.parametrize("name", list(JUNK))
@pytest.mark.parametrize("path", [None, "x.py", "x.ts", "x.c", "x.unknownext"])
def test_junk_never_crashes_or_grows(name, path):
    _assert_invariants(JUNK[name], path)


def test_half_a_real_file():
    text = _half(_read_site("aider", "repomap.py"))
    out = _assert_invariants(text, "repomap.py")
    assert _ratio(text, out) <= TARGET_RATIO


def test_ansi_is_stripped():
    out = compress_code(JUNK["ansi"], _opts("a.py")).text
    assert "\x1b" not in out and "def f3():" in out.splitlines()


# --------------------------------------------------------------------------- properties

FRAGMENTS = [
    "def f(a, b):",
    "class K(Base):",
    "function g(x) {",
    "const h = (y) => {",
    "}",
    "});",
    "return x",
    "if (a) {",
    "    pass",
    "x = [",
    "]",
    '"""doc',
    "# comment",
    "// note",
    "/*",
    " */",
    "@decorator",
    "import os",
    "… 2 lines …",
    "E0432 src/a.py:3",
    "\x1b[1m",
    "\ufffd",
]
line_st = st.tuples(
    st.integers(0, 4),
    st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=40)),
).map(lambda t: "    " * t[0] + t[1])
code_st = st.lists(line_st, max_size=80).map("\n".join)
path_st = st.sampled_from([None, "a.py", "a.js", "a.tsx", "a.go", "a.rs", "a.c", "a.cs", "a.zz"])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(code_st, path_st, st.data())
def test_property_never_grows_and_is_idempotent(text, path, data):
    words = sorted(set(re.findall(r"\w+", text)))
    hot = data.draw(st.lists(st.sampled_from(words), max_size=3)) if words else []
    _assert_invariants(text, path, hot)


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=3000), path_st)
def test_property_arbitrary_text(text, path):
    _assert_invariants(text, path)


# --------------------------------------------------------------------------- speed


def _clear_token_cache() -> None:
    with tokens._lock:
        tokens._cache.clear()


def test_benchmark_2000_line_python(benchmark):
    text = _read_site("aider", "coders/base_coder.py")
    assert text.count("\n") >= 2000
    compress_code(text, _opts("base_coder.py"))  # grammar loaded once per process
    out = benchmark.pedantic(
        compress_code,
        args=(text, _opts("base_coder.py")),
        setup=_clear_token_cache,
        rounds=20,
    )
    benchmark.extra_info.update(lines=text.count("\n"), ratio=_ratio(text, out.text))


def test_benchmark_700_line_javascript(benchmark):
    text = _read_site("torch", "utils/model_dump/code.js")
    compress_code(text, _opts("code.js"))
    out = benchmark(compress_code, text, _opts("code.js"))
    benchmark.extra_info.update(lines=text.count("\n"), ratio=_ratio(text, out.text))


def test_a_parse_that_outruns_its_budget_falls_back_to_indentation(monkeypatch):
    """tree-sitter's error recovery is super-linear on some junk (bench.fuzz: 480 KB of text read
    in the wrong encoding, 20 s), so a parse has a time budget linear in its size; past it the
    code is folded by indentation, as when no grammar fits."""
    source = Path(code_module.__file__).read_text()
    assert code_module._parse("python", source.encode()) is not None
    monkeypatch.setattr(code_module, "PARSE_BUDGET_S", 1e-6)
    monkeypatch.setattr(code_module, "PARSE_BUDGET_US_PER_BYTE", 0)
    assert code_module._parse("python", source.encode()) is None
    out = compress_code(source, CompressOptions(source=Source(path="code.py")))
    assert out.counts["indent_fallback"] == 1 and len(out.text) < len(source) / 2

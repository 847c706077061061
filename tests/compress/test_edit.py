"""The edit compressor turns applied edits into one line per file with honest line counts."""

from __future__ import annotations

import difflib
import re
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aider_gardener.compress.edit import compress_edit
from aider_gardener.types import CompressOptions

OPTS = CompressOptions(entry_id="k3j2abcd")
FENCE = "```"


def _counts(old: list[str], new: list[str]) -> tuple[int, int]:
    """Added/removed lines as ``diff -u`` reports them, counted without the compressor."""
    added = removed = 0
    for line in difflib.unified_diff(old, new, lineterm="", n=0):
        if line.startswith("+") and not line.startswith("+++"):
            added += 1
        elif line.startswith("-") and not line.startswith("---"):
            removed += 1
    return added, removed


def _block(path: str, old: list[str], new: list[str], lang: str = "python") -> str:
    return "\n".join(
        [path, FENCE + lang, "<<<<<<< SEARCH", *old, "=======", *new, ">>>>>>> REPLACE", FENCE]
    )


def _summary_lines(out: str) -> list[str]:
    return [x for x in out.splitlines() if re.match(r"^(edited|created|wrote|deleted|failed)", x)]


def _check(text: str, opts: CompressOptions = OPTS) -> str:
    out = compress_edit(text, opts).text
    assert len(out) <= len(text)
    assert compress_edit(out, opts).text == out
    return out


OLD = [
    "def parse(args):",
    '    """Parse the command line."""',
    "    opts = {}",
    "    for a in args:",
    "        opts[a] = True",
    "    return opts",
]
NEW = [
    "def parse(args, strict=False):",
    '    """Parse the command line."""',
    "    opts = {}",
    "    for a in args:",
    "        if strict and a.startswith('-'):",
    "            raise ValueError(a)",
    "        opts[a] = True",
    "    return opts",
    "",
    "",
    "def usage():",
    "    return 'usage: tool [args]'",
]


def test_single_block_becomes_one_line_with_diff_counts():
    text = "I'll make parse strict.\n\n" + _block("tool/cli.py", OLD, NEW) + "\n\nThat's it.\n"
    out = _check(text)
    a, r = _counts(OLD, NEW)
    assert (a, r) == (7, 1)  # the helper itself is sane
    assert out.splitlines()[2] == (
        f"edited tool/cli.py: +{a} -{r} lines (id=k3j2abcd); replaced: parse; added: usage"
    )
    assert out.startswith("I'll make parse strict.\n\n")
    assert out.endswith("\n\nThat's it.\n")
    assert "<<<<<<<" not in out and FENCE not in out


def test_several_blocks_for_one_path_sum_into_one_line():
    old2, new2 = ["X = 1"], ["X = 2", "Y = 3"]
    text = _block("pkg/a.py", OLD, NEW) + "\n\n" + _block("pkg/a.py", old2, new2) + "\n"
    out = _check(text)
    a1, r1 = _counts(OLD, NEW)
    a2, r2 = _counts(old2, new2)
    lines = _summary_lines(out)
    assert len(lines) == 1
    assert lines[0].startswith(f"edited pkg/a.py: +{a1 + a2} -{r1 + r2} lines (id=k3j2abcd)")
    assert compress_edit(text, OPTS).counts["blocks"] == 2


def test_blocks_inside_one_fence_and_several_paths():
    text = "\n".join(
        [
            "src/app.ts",
            FENCE + "typescript",
            "<<<<<<< SEARCH",
            "export function start() {",
            "  listen(80);",
            "}",
            "=======",
            "export function start(port: number) {",
            "  listen(port);",
            "}",
            ">>>>>>> REPLACE",
            "<<<<<<< SEARCH",
            "const LIMIT = 10;",
            "=======",
            "const LIMIT = 20;",
            ">>>>>>> REPLACE",
            FENCE,
            "",
            _block("README.md", ["# Tool"], ["# Tool", "", "Run it."], lang="markdown"),
        ]
    )
    out = _check(text)
    lines = _summary_lines(out)
    assert lines[0].startswith("edited src/app.ts: +3 -3 lines (id=k3j2abcd); replaced: start")
    assert "LIMIT" in lines[0]
    assert lines[1] == "edited README.md: +2 -0 lines (id=k3j2abcd)"


def test_new_file_from_empty_search():
    new = [
        "import os",
        "",
        "class Store:",
        "    def get(self, key):",
        "        return os.environ[key]",
    ]
    out = _check(_block("app/store.py", [], new))
    assert _summary_lines(out) == [
        f"created app/store.py: +{len(new)} lines (id=k3j2abcd); added: Store, Store.get"
    ]


def test_path_positions_aider_accepts():
    inside = "\n".join(
        [
            FENCE + "python",
            "lib/x.py",
            "<<<<<<< SEARCH",
            "a = 1",
            "=======",
            "a = 2",
            ">>>>>>> REPLACE",
            FENCE,
        ]
    )
    on_fence = "\n".join(
        [
            FENCE + "lib/y.py",
            "<<<<<<< SEARCH",
            "b = 1",
            "=======",
            "b = 2",
            ">>>>>>> REPLACE",
            FENCE,
        ]
    )
    no_fence = "\n".join(
        ["**lib/z.py**", "<<<<<<< SEARCH", "c = 1", "=======", "c = 2", ">>>>>>> REPLACE"]
    )
    for text, path in ((inside, "lib/x.py"), (on_fence, "lib/y.py"), (no_fence, "lib/z.py")):
        out = _check(text)
        assert _summary_lines(out)[0].startswith(f"edited {path}: +1 -1 lines"), out


def test_no_entry_id_omits_the_id():
    out = compress_edit(_block("a.py", OLD, NEW), CompressOptions()).text
    assert "(id=" not in out and out.startswith("edited a.py: +")


def test_unified_diff_counts_each_file():
    text = "\n".join(
        [
            FENCE + "diff",
            "diff --git a/web/hook.ts b/web/hook.ts",
            "index abcdef1..1234567 100644",
            "--- a/web/hook.ts",
            "+++ b/web/hook.ts",
            "@@ -1,5 +1,5 @@ export function useThing() {",
            " import { a } from 'x';",
            "-import { b } from 'y';",
            "+import { b, c } from 'y';",
            " ",
            "@@ -10,3 +10,5 @@ export function useThing() {",
            "   const v = a();",
            "+  const w = c();",
            "+  log(w);",
            "--- /dev/null",
            "+++ b/web/new.ts",
            "@@ -0,0 +1,2 @@",
            "+export const ONE = 1;",
            "+export const TWO = 2;",
            FENCE,
            "Done.",
        ]
    )
    out = _check(text)
    lines = _summary_lines(out)
    assert lines[0] == "edited web/hook.ts: +3 -1 lines (id=k3j2abcd); replaced: useThing"
    assert lines[1] == "created web/new.ts: +2 lines (id=k3j2abcd); added: ONE, TWO"
    assert out.endswith("Done.")


def test_whole_file_rewrite():
    body = ["def main():", "    print('hi')", "", "if __name__ == '__main__':", "    main()"]
    text = (
        "Here is the new file:\n\nhello.py\n" + FENCE + "python\n" + "\n".join(body) + "\n" + FENCE
    )
    out = _check(text)
    assert _summary_lines(out) == [
        f"wrote hello.py (whole file): {len(body)} lines (id=k3j2abcd); defines: main"
    ]


def test_ordinary_code_block_is_not_an_edit():
    text = "Run this:\n\n" + FENCE + "bash\npip install -e .\npytest -q\n" + FENCE + "\n"
    result = compress_edit(text, OPTS)
    assert result.text == text and result.counts["files"] == 0


def test_unterminated_block_is_summarised_and_marked():
    # a reply cut off mid-block: no REPLACE marker, no closing fence
    body = [f"value_{k} = {k}" for k in range(8)]
    text = "\n".join(["src/m.py", FENCE + "python", "<<<<<<< SEARCH", *body, "=======", "x = 2"])
    out = _check(text)
    (line,) = _summary_lines(out)
    assert line.startswith("edited src/m.py: +1 -8 lines (incomplete) (id=k3j2abcd); added: x;")
    body = ["    " + "".join(f"step({k}); " for k in range(10))] * 10
    only_search = "src/m.py\n" + FENCE + "\n<<<<<<< SEARCH\n" + "\n".join(body) + "\n"
    out = _check(only_search)
    assert "src/m.py" in out and "incomplete" in out


def test_method_names_are_qualified_by_class():
    old = ["class Repo:", "    def commit(self, msg):", "        run('git commit', msg)"]
    new = [
        "class Repo:",
        "    def commit(self, msg, amend=False):",
        "        run('git commit', msg)",
        "",
        "    def push(self):",
        "        run('git push')",
    ]
    line = _summary_lines(_check(_block("vcs.py", old, new)))[0]
    assert line.endswith("replaced: Repo.commit; added: Repo.push")


def test_removed_definition_is_named():
    old = ["def old_helper():", "    return 1", "", "def keep():", "    return 2"]
    new = ["def keep():", "    return 2"]
    line = _summary_lines(_check(_block("m.py", old, new)))[0]
    assert line == "edited m.py: +0 -3 lines (id=k3j2abcd); removed: old_helper"


def test_aider_failed_match_report_is_marked_failed():
    text = "\n".join(
        [
            "# 1 SEARCH/REPLACE block failed to match!",
            "",
            "## SearchReplaceNoExactMatch: This SEARCH block failed to exactly match lines in"
            " a/b.sol",
            "<<<<<<< SEARCH",
            "function f() public {",
            "=======",
            "function f() external {",
            ">>>>>>> REPLACE",
            "",
            "The SEARCH section must exactly match an existing block of lines",
        ]
    )
    out = _check(text)
    assert "## SearchReplaceNoExactMatch" in out  # the fact that it failed stays
    assert _summary_lines(out)[0].startswith("failed edit a/b.sol: +1 -1 lines")


def test_patch_format():
    text = "\n".join(
        [
            "*** Begin Patch",
            "*** Update File: app/main.py",
            "@@ def run():",
            "     x = 1",
            "-    y = 2",
            "+    y = 3",
            "*** Add File: app/new.py",
            "+VALUE = 1",
            "*** Delete File: app/old.py",
            "*** End Patch",
        ]
    )
    lines = _summary_lines(_check(text))
    assert lines == [
        "edited app/main.py: +1 -1 lines (id=k3j2abcd); replaced: run",
        "created app/new.py: +1 lines (id=k3j2abcd); added: VALUE",
        "deleted app/old.py (id=k3j2abcd)",
    ]


def test_output_never_longer_for_a_tiny_block():
    text = "a.py\n<<<<<<< SEARCH\n=======\n>>>>>>> REPLACE"
    out = compress_edit(text, OPTS).text
    assert len(out) <= len(text)


# --- real material --------------------------------------------------------------------------

REAL_BLOCK = re.compile(
    r"(?ms)^(?P<path>[^\s`#>][^\s`]*)\n```[^\n]*\n<<<<<<< SEARCH\n(?P<old>.*?)^=======\n"
    r"(?P<new>.*?)^>>>>>>> REPLACE\n```\n"
)


def _history_texts(histories_dir: Path) -> list[tuple[str, str]]:
    return [
        (p.name, p.read_text(encoding="utf-8", errors="replace"))
        for p in sorted(histories_dir.glob("*.md"))
    ]


def _exact_counts(old: list[str], new: list[str]) -> tuple[int, int]:
    sm = difflib.SequenceMatcher(None, old, new, autojunk=False)
    added = sum(j2 - j1 for t, _, _, j1, j2 in sm.get_opcodes() if t in ("replace", "insert"))
    removed = sum(i2 - i1 for t, i1, i2, _, _ in sm.get_opcodes() if t in ("replace", "delete"))
    return added, removed


def test_real_blocks_counts_and_paths(histories_dir: Path):
    seen = 0
    for name, text in _history_texts(histories_dir):
        for m in REAL_BLOCK.finditer(text):
            old = m.group("old").split("\n")[:-1]
            new = m.group("new").split("\n")[:-1]
            if "=======" in old + new or any(x.startswith("<<<<<<<") for x in old + new):
                continue  # nested markers: not a plain block
            out = _check(m.group(0))
            (line,) = _summary_lines(out)
            path = m.group("path")
            if not old or not any(x.strip() for x in old):
                assert line.startswith(f"created {path}: +{len(new)} lines"), (name, line)
            else:
                a, r = _exact_counts(old, new)
                assert line.startswith(f"edited {path}: +{a} -{r} lines"), (name, line)
            seen += 1
    assert seen > 500


def test_real_replies_name_every_edited_path(histories_dir: Path):
    replies = 0
    before = after = 0
    for name, text in _history_texts(histories_dir):
        for reply in re.split(r"(?m)^#### .*\n", text):
            if "<<<<<<< SEARCH" not in reply:
                continue
            out = _check(reply)
            replies += 1
            before += len(reply)
            after += len(out)
            for m in REAL_BLOCK.finditer(reply):
                assert any(m.group("path") in x for x in _summary_lines(out)), (name, m.group(1))
    assert replies > 100
    assert after < 0.8 * before


# --- properties -----------------------------------------------------------------------------

PIECES = [
    "<<<<<<< SEARCH",
    "=======",
    ">>>>>>> REPLACE",
    FENCE,
    FENCE + "python",
    FENCE + "src/q.py",
    "src/p.py",
    "--- a/x.py",
    "+++ b/x.py",
    "@@ -1 +1 @@ def f():",
    "+added",
    "-removed",
    " context",
    "diff --git a/x.py b/x.py",
    "*** Begin Patch",
    "*** Update File: z.py",
    "*** End Patch",
    "def f(x):",
    "class K:",
    "    return x",
    "Some prose, with words.",
    "edited x.py: +1 -1 lines",
    "\x1b[1mbold\x1b[0m",
    "\ufffd\x00",
    "",
]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=40)), max_size=60))
def test_property_malformed_input_never_crashes_or_grows(parts):
    text = "\n".join(parts)
    out = compress_edit(text, OPTS).text
    assert len(out) <= len(text)
    assert len(compress_edit(out, OPTS).text) <= len(out)


CODE_LINE = st.sampled_from(
    ["x = 1", "def g():", "    return 2", "class C:", "    pass", "", "const y = 3;", "# note"]
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["a.py", "pkg/b.ts", "c/d.go"]),
            st.lists(CODE_LINE, max_size=8),
            st.lists(CODE_LINE, max_size=8),
        ),
        min_size=1,
        max_size=5,
    )
)
def test_property_well_formed_blocks_counted_exactly_and_idempotent(blocks):
    text = "Intro.\n\n" + "\n\n".join(_block(p, o, n) for p, o, n in blocks) + "\n\nOutro.\n"
    out = _check(text)
    totals: dict[str, list[int]] = {}
    for path, old, new in blocks:
        if not any(x.strip() for x in old) and path not in totals:
            old = []
        a, r = _exact_counts(old, new)
        t = totals.setdefault(path, [0, 0])
        t[0] += a
        t[1] += r
    lines = _summary_lines(out)
    assert len(lines) == len(totals)
    for path, (a, r) in totals.items():
        (line,) = [x for x in lines if x.split(":")[0].split(" ")[-1] == path]
        assert f": +{a} " in line or f": +{a} lines" in line
        if not line.startswith("created") or r:
            assert f" -{r} lines" in line


# --- speed ----------------------------------------------------------------------------------


def test_benchmark_edit_on_real_replies(benchmark, histories_dir: Path):
    text = (histories_dir / "Aider-AI__aider.md").read_text(encoding="utf-8", errors="replace")
    replies = [r for r in re.split(r"(?m)^#### .*\n", text) if "<<<<<<< SEARCH" in r][:200]

    def run():
        return [compress_edit(r, OPTS) for r in replies]

    results = benchmark(run)
    assert sum(len(r.text) for r in results) < sum(len(r) for r in replies)

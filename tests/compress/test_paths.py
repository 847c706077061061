"""Path lists: every name that fits the budget, grouped by directory, the rest counted with the id
(issue 22: a Glob of 300 files reached the model as one ``[×100] docs/area_<n>/…`` template)."""

from __future__ import annotations

import random

from aider_gardener.classify import segment
from aider_gardener.compress import paths
from aider_gardener.compress.log import compress_log
from aider_gardener.pipeline import compress
from aider_gardener.tokens import count_tokens
from aider_gardener.types import CompressOptions, ContentClass, Source

FIND = "find . -name '*.md'"


def similar_files(n_dirs: int = 10, per_dir: int = 30, seed: int = 3) -> list[str]:
    """300 similarly named files in 10 directories, listed in no particular order."""
    found = [
        f"./docs/area_{d}/notes/design_note_{i}_component_specification.md"
        for d in range(n_dirs)
        for i in range(per_dir)
    ]
    random.Random(seed).shuffle(found)
    return found


def names_under(tree: str) -> set[str]:
    """The full paths a tree names: each indented name under the directory line above it."""
    out, where = set(), ""
    for line in tree.splitlines():
        if line.startswith("  "):
            out.add(where + line[2:])
        elif paths.is_path(line.split(" (")[0]):
            where = line.split(" (")[0]
            out.add(where) if not where.endswith("/") else None
    return out


def test_a_path_list_is_routed_to_the_path_compressor():
    text = "\n".join(similar_files()) + "\n"
    segs = segment(text, Source(role="tool", command=FIND))
    assert [(s.cls, s.meta.get("format")) for s in segs] == [(ContentClass.STRUCTURED, "paths")]
    glob = "\n".join(p[2:] for p in similar_files())
    assert segment(glob, Source(role="tool", command="Glob **/*.md"))[0].meta["format"] == "paths"


def test_logs_and_listings_with_prose_are_not_path_lists():
    log = "\n".join(f"2026-01-01 INFO worker {i}: done src/a_{i}.py" for i in range(50))
    assert paths.path_list(log) is None
    grep = "\n".join(f"src/a_{i}.py:{i}:    x = {i}" for i in range(50))
    assert paths.path_list(grep) is None
    assert paths.path_list("\n".join(str(i) for i in range(50))) is None  # numbers, no names
    assert paths.path_list("a.py\nb.py\nc.py") is None  # too few to be worth it


def test_300_similar_files_keep_every_name_that_fits_and_count_the_rest():
    listed = similar_files()
    out = compress("\n".join(listed) + "\n", Source(role="tool", command=FIND))
    body = out.summary
    shown = names_under(body)
    assert shown <= set(listed)
    k = len(shown)
    assert 150 <= k < 300  # each name ~10 tokens, the budget 2,000
    assert shown == set(listed[:k])  # the first k, in the order listed: none skipped
    assert f"… {300 - k} more paths (id={out.entry_id}" in body
    assert f"[paths: 300 in 10 directories, {k} shown grouped by directory]" in body
    assert "<n>" not in body and "[×" not in body  # never folded into a template
    assert count_tokens(body) <= paths.PATH_TOKENS + 40  # the handle line on top
    assert names_under(compress_log("\n".join(listed), CompressOptions()).text) >= shown


def test_a_bigger_budget_keeps_every_name_and_a_floor_beats_the_budget():
    found = paths.path_list("\n".join(similar_files()))
    assert len(names_under(paths.render(found, budget=10_000))) == 300
    tree = paths.render(found, budget=500, floor=300)
    assert names_under(tree) == set(similar_files()) and "more paths" not in tree


def test_a_tree_is_cheaper_than_the_flat_list_or_the_flat_list_is_kept():
    found = paths.path_list("\n".join(similar_files()))
    tree = paths.render(found, budget=10_000)
    flat = "\n".join(found.paths)
    assert count_tokens(tree) < 0.8 * count_tokens(flat)
    # one file per directory: a tree would only add the directory lines
    spread = paths.path_list("\n".join(f"pkg_{i}/mod/file_{i}.py" for i in range(40)))
    out = paths.render(spread, budget=10_000)
    assert out.splitlines()[:40] == spread.paths and "shown as listed" in out


def test_lines_that_are_not_paths_are_kept_apart():
    listed = similar_files(2, 20)
    text = "\n".join(["find: './secret': Permission denied", *listed])
    out = paths.render(paths.path_list(text), budget=10_000)
    assert out.splitlines()[0] == "find: './secret': Permission denied"
    assert names_under(out) == set(listed)


def test_a_summary_compresses_to_itself():
    text = "\n".join(similar_files())
    once = paths.compress_paths(text, CompressOptions(entry_id="abcdefghij")).text
    assert paths.path_list(once) is None
    assert compress_log(once, CompressOptions()).text == once
    out = compress(text, Source(role="tool", command=FIND))
    assert compress(out.summary, Source(role="tool", command=FIND)).summary == out.summary


def test_detection_is_linear_on_hostile_lines():
    import time

    t = time.perf_counter()
    paths.path_list(("a/" * 200_000) + "\n" + "x" * 1_000_000 + "\n" + "./" * 500_000)
    assert time.perf_counter() - t < 1.0


def git_status_long(n: int = 120) -> tuple[str, dict[str, str]]:
    """``git status`` with every section: staged (a rename among them), not staged, untracked;
    and the letter each path should carry."""
    staged = [f"src/core/staged_module_{i}.py" for i in range(n // 4)]
    changed = [f"src/app/views/changed_view_{i}.py" for i in range(n // 2)]
    untracked = [f"notes/draft_{i}.md" for i in range(n // 4)]
    lines = [
        "On branch main",
        "Changes to be committed:",
        '  (use "git restore --staged <file>..." to unstage)',
        "\trenamed:    src/old_name.py -> src/core/new_name.py",
        *[f"\tnew file:   {p}" for p in staged],
        "",
        "Changes not staged for commit:",
        '  (use "git add <file>..." to update what will be committed)',
        *[f"\tmodified:   {p}" for p in changed],
        "\tdeleted:    src/app/gone.py",
        "",
        "Untracked files:",
        '  (use "git add <file>..." to include in what will be committed)',
        *[f"\t{p}" for p in untracked],
        "",
    ]
    marks = {"src/core/new_name.py": "R+", "src/app/gone.py": "D"}
    marks.update({p: "A+" for p in staged})
    marks.update({p: "M" for p in changed})
    marks.update({p: "??" for p in untracked})
    return "\n".join(lines), marks


def marked(tree: str) -> dict[str, str]:
    """path -> the status letter(s) a tree shows before its name."""
    out, where = {}, ""
    for line in tree.splitlines():
        if line.startswith("  ") and where:  # git's "  (use ...)" hints come before the tree
            mark, _, name = line[2:].partition(" ")
            out[where + name.split(" (from ")[0]] = mark
        elif line.endswith("/") or line.split(" (")[0].endswith("/"):
            where = line.split(" (")[0]
    return out


def test_git_status_keeps_every_path_with_its_letter():
    """``git status`` of 360 modified files reached the model as ``[×360] modified: <*>``."""
    text, marks = git_status_long()
    assert segment(text, Source(role="tool", command="git status"))[0].meta["format"] == "paths"
    found = paths.path_list(text)
    assert found is not None and len(found.paths) == len(marks)
    out = paths.render(found, budget=10_000, entry_id="abcdefghij")
    assert marked(out) == marks
    assert "(from src/old_name.py)" in out and out.splitlines()[0] == paths.LEGEND
    assert "On branch main" in out and "Untracked files:" in out
    summary = compress(text, Source(role="tool", command="git status")).summary
    assert "[×" not in summary and "<*>" not in summary
    shown = marked(summary)
    assert len(shown) > 60 and all(marks[p] == m for p, m in shown.items())


def test_git_status_short_format_and_porcelain():
    rows = [f" M src/pkg_{i % 4}/mod_{i}.py" for i in range(40)]
    rows += ["MM src/both.py", "A  src/added.py", "R  a/old.py -> a/new.py", "?? tmp/x.txt"]
    out = paths.render(paths.path_list("\n".join(rows)), budget=10_000)
    shown = marked(out)
    assert shown["src/pkg_1/mod_1.py"] == "M" and shown["src/both.py"] == "M+M"
    assert (
        shown["src/added.py"] == "A+" and shown["a/new.py"] == "R+" and shown["tmp/x.txt"] == "??"
    )
    assert "(from a/old.py)" in out

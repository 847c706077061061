"""Path lists in the real Claude Code CLI (issue 22, point 3), against ``fake_anthropic.py``.

In a temp git repo of 300 similarly named Markdown files in 10 directories, the fake model
calls Glob ``**/*.md`` and then Bash ``find . -name '*.md'``; the same script runs once with the
plugin and once without. The tool results the model receives (captured by the fake API) must
name at least as many of the real paths with the plugin as without, and the stored id. Before,
the Glob reached the model as ``[×100] docs/area_<n>/notes/design_note_<n>_…md``: none.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.clients.fake_anthropic import FakeAnthropic, result_text, text, tool_results, tool_use
from tests.clients.test_claude_code_e2e import (  # noqa: F401  (fixtures used by name)
    claude_cli,
    gardener_env_path,
    gardener_plugin,
    private_hook_servers,
    run_claude,
    store_entries,
)
from tests.compress.test_paths import names_under

GLOB = "**/*.md"
FIND = "find . -name '*.md'"


def make_repo(root: Path) -> set[str]:
    """300 files, 30 in each of 10 directories; their paths relative to ``root``."""
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    made = set()
    for d in range(10):
        folder = root / "docs" / f"area_{d}" / "notes"
        folder.mkdir(parents=True)
        for i in range(30):
            name = f"design_note_{i}_component_specification.md"
            (folder / name).write_text(f"# note {d}.{i}\n", encoding="utf-8")
            made.add(f"docs/area_{d}/notes/{name}")
    return made


def session(cli: str, root: Path, plugin: bool) -> list[str]:
    """The texts of the Glob's and the find's results as the model received them."""
    script = [
        [tool_use("Glob", {"pattern": GLOB})],
        [tool_use("Bash", {"command": FIND, "description": "list the notes"})],
        [text("Listed.")],
    ]
    home = root.parent / ("home-plugin" if plugin else "home-plain")
    home.mkdir()
    args = ["--allowedTools", "Glob", "Bash"]
    if plugin:
        args = ["--plugin-dir", str(gardener_plugin()), *args]
    with FakeAnthropic(script) as api:
        run_claude(cli, api, root, home, "list the notes", *args, env={"PATH": gardener_env_path()})
    last = api.main_requests[-1].body
    return [result_text(tr) for tr in tool_results(last)]


def real_paths(seen: str, made: set[str]) -> set[str]:
    """The real paths a result names, in a flat list or a tree (``./`` prefixes dropped)."""
    named = {p[2:] if p.startswith("./") else p for p in names_under(seen)}
    return named & made


@pytest.fixture(scope="module")
def lists(claude_cli, tmp_path_factory):  # noqa: F811
    plain_root = tmp_path_factory.mktemp("plain") / "work"
    plugin_root = tmp_path_factory.mktemp("plugin") / "work"
    plain_root.mkdir()
    plugin_root.mkdir()
    made = make_repo(plain_root)
    assert make_repo(plugin_root) == made
    plain = session(claude_cli, plain_root, plugin=False)
    with_plugin = session(claude_cli, plugin_root, plugin=True)
    return made, plain, with_plugin, plugin_root


def test_a_300_file_glob_shows_at_least_the_paths_plain_claude_code_shows(lists):
    made, plain, with_plugin, root = lists
    plain_paths, plugin_paths = real_paths(plain[0], made), real_paths(with_plugin[0], made)
    assert len(plain_paths) == 100  # Glob's own limit
    assert len(plugin_paths) >= len(plain_paths), with_plugin[0][:2000]
    [row] = [r for r in store_entries(root) if r["command"] == f"Glob {GLOB}"]
    assert with_plugin[0].startswith(f"[full output stored: id={row['id']}] ")
    assert "[×" not in with_plugin[0] and "<n>" not in with_plugin[0]
    assert "(Showing 100 of 300 matching files;" in with_plugin[0]


def test_a_find_of_300_files_shows_at_least_the_paths_plain_claude_code_shows(lists):
    made, plain, with_plugin, root = lists
    plain_paths, plugin_paths = real_paths(plain[1], made), real_paths(with_plugin[1], made)
    assert len(plain_paths) == 300
    assert len(plugin_paths) >= len(plain_paths), with_plugin[1][:2000]
    [row] = [r for r in store_entries(root) if r["command"] == FIND]
    assert with_plugin[1].startswith(f"[full output stored: id={row['id']}] ")
    assert len(with_plugin[1]) < len(plain[1])

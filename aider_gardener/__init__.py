"""aider-gardener: incremental garbage collection for Aider's chat context.

Importing the package makes it offline (see ``offline``) before any dependency loads. The content
pipeline's entry point is ``aider_gardener.pipeline.compress``; it is not re-exported here because
the ``aider_gardener.compress`` name belongs to the compressors subpackage (a function of that name
would be replaced by the subpackage as soon as it is imported).

The names below load at first use: every Claude Code hook is a fresh interpreter that imports
this package, and the tokenizer and types cost it ~50 ms it does not need.
"""

from __future__ import annotations

from typing import Any

from . import offline  # noqa: F401  (must run first)

__version__ = "0.1.0"

_EXPORTS = {
    "CompressOptions": "types",
    "CompressionResult": "types",
    "ContentClass": "types",
    "Segment": "types",
    "Source": "types",
    "count_tokens": "tokens",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)

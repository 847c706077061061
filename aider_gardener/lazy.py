"""``lazy_module``: a module imported at its first attribute access, not where it is named.

For the few modules that cost Aider's time to the first prompt (hundreds of regexes compiled at
import) but are needed only once the first message arrives. Unlike ``importlib.util.LazyLoader``
(not thread-safe before Python 3.12) the real import runs under the import lock, so threads that
touch the module at once both get it whole.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class _LazyModule:
    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        module: ModuleType = importlib.import_module(self._name)
        return getattr(module, attr)

    def __repr__(self) -> str:
        return f"<lazy module {self._name!r}>"


def lazy_module(name: str) -> Any:
    """``name`` is absolute (``aider_gardener.continuity.extract``)."""
    return _LazyModule(name)

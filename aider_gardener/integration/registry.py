"""Garden every coder Aider can create, by replacing the classes in ``aider.coders.__all__``.

That list is Aider's only coder registry: ``main``, the SwitchCoder loop, ``/chat-mode``,
``/ask q``, the architect's editor and ``/lint`` all call ``Coder.create`` on the base class,
which instantiates the first class in the list whose ``edit_format`` matches. Replacing each
entry in place with a subclass that puts ``GardenerMixin`` first gardens all of them; overriding
``create`` would not (it is looked up on ``Coder`` itself). ``__doc__`` is copied because
``/chat-mode`` lists each format with the first line of its class docstring.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Iterator

_lock = threading.Lock()
_gardened: dict[type, type] = {}  # original class -> its gardened subclass


def gardened_class(cls: type) -> type:
    """The gardened subclass of one coder class (created once, then reused)."""
    from .mixin import GardenerMixin

    if issubclass(cls, GardenerMixin):
        return cls
    with _lock:
        sub = _gardened.get(cls)
        if sub is None:
            sub = type(
                f"Gardened{cls.__name__}",
                (GardenerMixin, cls),
                {"__doc__": cls.__doc__, "__module__": __name__, "_garden_original": cls},
            )
            _gardened[cls] = sub
        return sub


def is_gardened(obj: object) -> bool:
    from .mixin import GardenerMixin

    cls = obj if isinstance(obj, type) else type(obj)
    return issubclass(cls, GardenerMixin)


def garden_coders() -> list[type]:
    """Replace every class in ``aider.coders.__all__`` in place; idempotent. Returns the list
    as it was before (to hand to ``restore_coders``)."""
    import aider.coders as coders

    before = list(coders.__all__)
    for i, cls in enumerate(coders.__all__):
        coders.__all__[i] = gardened_class(cls)
    return before


def restore_coders(classes: list[type] | None = None) -> None:
    """Put ``classes`` (default: the original of each entry) back into the same list object, so
    every module that imported it sees the change."""
    import aider.coders as coders

    if classes is None:
        classes = [getattr(c, "_garden_original", c) for c in coders.__all__]
    coders.__all__[:] = classes


@contextlib.contextmanager
def gardened() -> Iterator[list[type]]:
    """Garden the registry for the duration of the block, then restore exactly what was there
    (tests use this so one test's gardening never leaks into another)."""
    import aider.coders as coders

    before = list(coders.__all__)
    garden_coders()
    try:
        yield coders.__all__
    finally:
        restore_coders(before)

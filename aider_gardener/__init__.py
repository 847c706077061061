"""aider-gardener: incremental garbage collection for Aider's chat context.

Importing the package makes it offline (see ``offline``) before any dependency loads.
"""

from . import offline  # noqa: F401  (must run first)
from .tokens import count_tokens
from .types import CompressionResult, CompressOptions, ContentClass, Segment, Source

__version__ = "0.1.0"


def compress(data, source=None, opts=None, cls=None) -> CompressionResult:
    """Classify and compress one input; see ``aider_gardener.pipeline.compress``."""
    from .pipeline import compress as _compress

    return _compress(data, source=source, opts=opts, cls=cls)


__all__ = [
    "CompressOptions",
    "CompressionResult",
    "ContentClass",
    "Segment",
    "Source",
    "compress",
    "count_tokens",
]

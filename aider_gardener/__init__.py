"""aider-gardener: incremental garbage collection for Aider's chat context.

Importing the package makes it offline (see ``offline``) before any dependency loads. The content
pipeline's entry point is ``aider_gardener.pipeline.compress``; it is not re-exported here because
the ``aider_gardener.compress`` name belongs to the compressors subpackage (a function of that name
would be replaced by the subpackage as soon as it is imported).
"""

from . import offline  # noqa: F401  (must run first)
from .tokens import count_tokens
from .types import CompressionResult, CompressOptions, ContentClass, Segment, Source

__version__ = "0.1.0"


__all__ = [
    "CompressOptions",
    "CompressionResult",
    "ContentClass",
    "Segment",
    "Source",
    "count_tokens",
]

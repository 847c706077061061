"""Placeholder until the code compressor lands; the safe runner turns this into head/tail."""

from __future__ import annotations

from ..types import Compressed, CompressOptions


def compress_code(text: str, opts: CompressOptions) -> Compressed:
    raise NotImplementedError("code compressor")

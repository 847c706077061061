"""Placeholder until the error compressor lands; the safe runner turns this into head/tail."""

from __future__ import annotations

from ..types import Compressed, CompressOptions


def compress_error(text: str, opts: CompressOptions) -> Compressed:
    raise NotImplementedError("error compressor")

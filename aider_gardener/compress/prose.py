"""Placeholder until the prose compressor lands; the safe runner turns this into head/tail."""

from __future__ import annotations

from ..types import Compressed, CompressOptions


def compress_prose(text: str, opts: CompressOptions) -> Compressed:
    raise NotImplementedError("prose compressor")

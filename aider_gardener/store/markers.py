"""One-line files in a store's folder that say what the store is (its embedding model, its
language), read by processes that have not opened the store yet, so written atomically: a
reader sees the old line or the new one."""

from __future__ import annotations

import os
from pathlib import Path


def read(store_dir: Path | str, name: str) -> str | None:
    """The marker's line, stripped; None when it is missing or not text."""
    try:
        return (Path(store_dir) / name).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None


def write(store_dir: Path | str, name: str, line: str) -> None:
    path = Path(store_dir) / name
    tmp = path.with_name(f".{name}.{os.getpid()}")
    tmp.write_text(line + "\n", encoding="utf-8")
    os.replace(tmp, path)

"""Real file-system faults for the store's tests: a small disk that fills up, a read-only file or
folder.

Real where the machine allows it: a tmpfs of a few hundred kB (``ENOSPC`` from the kernel) and
read-only bind mounts (``EROFS``) need mount rights, which root has in this project's
containers; chmod does not stop root from writing, so it is the fallback for other users only.
Without either, "disk full" is SQLite's own ``PRAGMA max_page_count`` on the real file (the same
``SQLITE_FULL`` error) and read-only tests skip.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import stat
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest


def _run(*args: str) -> bool:
    return subprocess.run(args, capture_output=True).returncode == 0


@functools.lru_cache(maxsize=1)
def can_mount() -> bool:
    if os.geteuid() != 0:
        return False
    with tempfile.TemporaryDirectory() as tmp:
        if not _run("mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", tmp):
            return False
        _run("umount", "-l", tmp)
    return True


def _unmount(path: Path) -> None:
    for _ in range(20):  # a connection closing in another thread may still hold it a moment
        if _run("umount", str(path)):
            return
    _run("umount", "-l", str(path))


@contextlib.contextmanager
def small_disk(folder: Path, size_kb: int = 1024) -> Iterator[Callable[[Any], str]]:
    """``folder`` on a disk of its own, and ``fill(store)``, which leaves that disk with no
    free byte: a tmpfs of ``size_kb`` filled by a file. Without mount rights the folder is a
    plain one and ``fill`` caps the store's database at its current size instead. ``fill``
    returns which of the two it did ("tmpfs" or "max_page_count")."""
    folder.mkdir(parents=True, exist_ok=True)
    mounted = can_mount() and _run(
        "mount", "-t", "tmpfs", "-o", f"size={size_kb}k,mode=0700", "tmpfs", str(folder)
    )

    def fill(store: Any = None) -> str:
        if not mounted:
            store.read(
                lambda c: c.execute(
                    "PRAGMA max_page_count = " + str(c.execute("PRAGMA page_count").fetchone()[0])
                )
            )
            return "max_page_count"
        fd = os.open(folder / "filler", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            while True:
                os.write(fd, b"\0" * 4096)
        except OSError as err:
            assert err.errno == errno.ENOSPC
        finally:
            os.close(fd)
        return "tmpfs"

    try:
        yield fill
    finally:
        if mounted:
            _unmount(folder)


@contextlib.contextmanager
def read_only(path: Path) -> Iterator[str]:
    """``path`` (a file or a folder) cannot be written for the block: a read-only bind mount
    where mounts are allowed, else chmod for a user other than root (skips as root without
    mount rights). Yields which it used."""
    if can_mount():
        if not _run("mount", "--bind", str(path), str(path)):
            pytest.skip("bind mount failed")
        if not _run("mount", "-o", "remount,bind,ro", str(path), str(path)):
            _unmount(path)
            pytest.skip("read-only remount failed")
        try:
            yield "mount"
        finally:
            _unmount(path)
        return
    if os.geteuid() == 0:
        pytest.skip("root without mount rights: nothing makes a file read-only")
    paths = [path, *path.rglob("*")] if path.is_dir() else [path]
    modes = {p: p.stat().st_mode for p in paths}
    for p in paths:
        p.chmod(stat.S_IMODE(modes[p]) & ~0o222)
    try:
        yield "chmod"
    finally:
        for p in reversed(paths):
            p.chmod(stat.S_IMODE(modes[p]))

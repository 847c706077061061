"""The Claude Code replay's measure of ids and paths the next call used: what counts as shown."""

from __future__ import annotations

from bench.next_refs import kept, used


def test_a_path_is_kept_whole_or_as_its_folder_and_name():
    assert kept("src/core.sh", "ran: src/core.sh failed")
    assert kept("src/modules/core.sh", "src/modules/\n  core.sh\n  other.sh")
    # a git status tree puts the status letters before the name
    assert kept("src/modules/core.sh", "src/modules/\n  M core.sh\n  ?? new.sh")
    assert kept("src/modules/new.sh", "src/modules/\n  M core.sh\n  ?? new.sh")
    # names given back after a folded template, by folder
    assert kept("work/assets/boot.sh", "[×9] inflating: <*>\n  work/assets/: a.sh, boot.sh, c")
    assert kept("work/assets/c", "  work/assets/: a.sh, boot.sh, c")


def test_a_path_not_shown_is_not_kept():
    assert not kept("src/modules/core.sh", "src/modules/\n  M core.sh.bak")
    assert not kept("src/modules/core.sh", "lib/\n  core.sh")  # another folder only
    assert not kept("work/assets/boot.sh", "  work/assets/: a.sh, boot.sh.orig")
    assert not kept("work/assets/boot.sh", "  work/other/: boot.sh")
    assert not kept("x_unique_id_1234", "[×12] ('row', <*>, False)")


def test_used_finds_the_ids_the_next_call_took_from_the_result():
    out = "  inflating: magisk_work/assets/boot_patch.sh\n  inflating: magisk_work/x.so"
    refs = used({"command": "bash magisk_work/assets/boot_patch.sh"}, out)
    assert "magisk_work/assets/boot_patch.sh" in refs

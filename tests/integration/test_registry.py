"""Every coder Aider can create is gardened; the registry is restored exactly."""

from __future__ import annotations

import pytest

import aider_gardener  # noqa: F401
from aider_gardener.integration.mixin import GardenerMixin
from aider_gardener.integration.registry import (
    garden_coders,
    gardened,
    gardened_class,
    is_gardened,
    restore_coders,
)


def _formats():
    import aider.coders as coders

    return sorted({c.edit_format for c in coders.__all__ if getattr(c, "edit_format", None)})


def test_gardened_replaces_every_class_in_place_and_restores():
    import aider.coders as coders

    the_list = coders.__all__
    before = list(the_list)
    assert not any(is_gardened(c) for c in before)
    with gardened() as classes:
        assert classes is the_list  # the same list object every importer holds
        assert len(the_list) == len(before)
        for orig, new in zip(before, the_list):
            assert issubclass(new, orig) and issubclass(new, GardenerMixin)
            assert new.__name__ == f"Gardened{orig.__name__}"
            assert new.__doc__ == orig.__doc__
            assert getattr(new, "edit_format", None) == getattr(orig, "edit_format", None)
        garden_coders()  # idempotent: no double wrapping
        assert [c._garden_original for c in the_list] == before
    assert coders.__all__ is the_list and the_list == before


def test_gardened_class_is_cached_and_idempotent():
    from aider.coders import AskCoder

    sub = gardened_class(AskCoder)
    assert gardened_class(AskCoder) is sub
    assert gardened_class(sub) is sub


def test_restore_without_argument_maps_back_to_originals():
    import aider.coders as coders

    before = list(coders.__all__)
    try:
        garden_coders()
        restore_coders()
        assert coders.__all__ == before
    finally:
        coders.__all__[:] = before


def test_chat_mode_lists_descriptions_not_no_description(make_coder, capsys):
    coder = make_coder()
    coder.commands.cmd_chat_mode("")
    out = capsys.readouterr().out
    assert "ask" in out and "No description" not in out


@pytest.mark.parametrize("edit_format", _formats())
def test_every_edit_format_is_gardened(make_coder, edit_format):
    coder = make_coder(edit_format)
    assert coder.edit_format == edit_format
    assert is_gardened(coder)
    if edit_format == "help":
        assert coder.gardener is None  # /help is a passive helper
    else:
        assert coder.gardener is not None
        assert type(coder.summarizer).__name__ == "GardenerSummary"


def test_coder_without_our_commands_is_upgraded(garden, repo):
    from aider.coders import Coder
    from aider.io import InputOutput
    from aider.models import Model

    from aider_gardener.integration.commands import GardenCommands

    coder = Coder.create(Model("gpt-4o"), None, InputOutput(pretty=False, yes=True), stream=False)
    assert isinstance(coder.commands, GardenCommands)
    assert coder.commands.coder is coder
    assert coder.gardener is coder.commands.gardener
    coder.gardener.close()

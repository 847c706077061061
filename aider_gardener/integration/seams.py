"""``CoderLike``: the part of Aider's ``Coder`` the gardener uses, for type checking only.

Aider is not type-checked here (mypy skips third-party modules, so its ``Coder`` would be
``Any``); this Protocol names, instead, exactly what the integration reads or calls on a coder,
so a new use shows up in review and mypy checks the calls. Attributes read with ``getattr`` and
a default (``root``, ``repo``, ``summarizer``) are left out on purpose: a coder may lack them.
Nothing imports this module at run time: users import it under ``TYPE_CHECKING``.
"""

from __future__ import annotations

from typing import Any, ContextManager, Protocol


class CoderLike(Protocol):
    main_model: Any  # aider.models.Model: name, info, token_count, weak_model, ...
    io: Any  # aider.io.InputOutput: tool_output, tool_warning, tool_error, confirm_ask, ...
    edit_format: str
    gpt_prompts: Any
    cur_messages: list[dict[str, Any]]
    done_messages: list[dict[str, Any]]
    abs_fnames: set[str]
    abs_read_only_fnames: set[str]

    def get_rel_fname(self, fname: str) -> str: ...

    def fmt_system_prompt(self, prompt: str) -> str: ...

    def format_messages(self) -> Any: ...  # aider.coders.chat_chunks.ChatChunks

    def garden_preview(self) -> ContextManager[None]: ...  # GardenerMixin's, on gardened coders

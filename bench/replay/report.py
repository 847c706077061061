"""The side-by-side table (rich), and the optional plot.

The table shows each replay's modes as columns, with each figure's ratio to plain ``aider``
underneath, because the claim to check is relative ("≥ 50% fewer prompt tokens than aider").
With two or more replays a last table sums them, since the claim is about the whole set.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

ROWS = (
    ("prompt tokens billed", "prompt_tokens_total", True),
    ("billed, turns all answered", "prompt_tokens_common", True),
    ("  turns all answered", "common_turns", False),
    ("peak prompt", "prompt_tokens_peak", True),
    ("requests", "requests", False),
    ("overflows", "overflows", False),
    ("LLM summary calls", "llm_summary_calls", False),
    ("summary input tokens", "llm_summary_input_tokens", False),
    ("gardener ms p50", "gardener_ms_p50", False),
    ("gardener ms p95", "gardener_ms_p95", False),
    # > 0: those turns were measured with a busy background embedder (runner.BusyEmbedder)
    ("  chunks embedded meanwhile", "background_chunks", False),
    ("gardener store open ms", "gardener_open_ms", False),
    ("wall s", "wall_s", False),
)
PROBE_ROWS = (
    ("probe in prompt", "probe_in_prompt"),
    ("probe in recall@5", "probe_in_recall5"),
    ("probe in prompt|recall@5", "probe_in_prompt_or_recall5"),
    ("  at distance ≥ 40", "probe_long"),
    ("  verbatim only", "probe_in_prompt_or_recall5_verbatim"),
)
# continuity replays: probe in prompt|recall@5 after each kind of reset (rows shown when asked)
PHASE_ROWS = (
    ("  after /soft-restart", "after-soft-restart"),
    ("  after resume", "after-resume"),
    ("  after a new session", "after-new-session"),
)
# store opening is once per Aider process: a sum over replays says nothing about it
NOT_IN_TOTALS = {"gardener_open_ms"}
BASELINE = "aider"
MAX_MODE_COLUMNS = 5


def _num(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.1f}"
    return f"{value:,}"


def _ratio(value: float, base: float) -> str:
    if not base:
        return ""
    return f" ({value / base:.2f}×)"


_NONE = {"hit": 0, "n": 0}
MISSING = "–"


def _frac(fig: dict[str, int]) -> str:
    if not fig["n"]:
        return MISSING
    return f"{fig['hit']}/{fig['n']} ({100 * fig['hit'] / fig['n']:.0f}%)"


def _cell(fig: dict[str, Any], base: dict[str, Any] | None, key: str, with_ratio: bool) -> str:
    """A figure (``–`` when a report written before it existed lacks it), with its ratio to
    the baseline's when both have it."""
    if key not in fig:
        return MISSING
    cell = _num(fig[key])
    if with_ratio and base is not None and key in base:
        cell += _ratio(fig[key], base[key])
    return cell


def build_table(
    title: str,
    modes: dict[str, dict[str, Any]],
    rows: tuple[tuple[str, str, bool], ...] = ROWS,
    headers: dict[str, str] | None = None,
) -> Any:
    """One table: a column per mode of ``{mode: figures}`` (headed ``headers[mode]`` if
    given), the figures of ``rows``, the probe rows, and the phase rows that were asked."""
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    table.add_column("")
    for mode in modes:
        table.add_column((headers or {}).get(mode, mode), justify="right")
    base = modes.get(BASELINE)
    for label, key, with_ratio in rows:
        table.add_row(label, *[_cell(fig, base, key, with_ratio) for fig in modes.values()])
    for label, key in PROBE_ROWS:
        table.add_row(label, *[_frac(fig.get(key, _NONE)) for fig in modes.values()])
    for label, phase in PHASE_ROWS:
        cells = [
            fig.get("probe_phases", {}).get(phase, {}).get("probe_in_prompt_or_recall5")
            for fig in modes.values()
        ]
        if any(cells):
            table.add_row(label, *[_frac(c or _NONE) for c in cells])
    return table


def totals_table(totals: dict[str, Any]) -> Any:
    """The sums over every replay; a mode that ran fewer replays than the report has says how
    many in its header, since its sums are then not comparable."""
    n = totals["replays"]
    modes = totals["modes"]
    headers = {
        mode: f"{mode} ({fig['replays']} replays)"
        for mode, fig in modes.items()
        if fig.get("replays", n) != n
    }
    rows = tuple(row for row in ROWS if row[1] not in NOT_IN_TOTALS)
    title = f"all {n} replays (sums; peak = the highest, gardener ms over every turn)"
    return build_table(title, modes, rows, headers)


def build_tables(report: dict[str, Any]) -> list[Any]:
    """A table per replay, then the totals table when the report has one."""
    tables = []
    for name, entry in report["replays"].items():
        meta = entry.get("meta", {})
        title = f"{name} ({meta.get('model', '?')}, window {meta.get('max_input_tokens', 0):,})"
        tables.append(build_table(title, entry["modes"]))
    if report.get("totals"):
        tables.append(totals_table(report["totals"]))
    return tables


def print_report(report: dict[str, Any], console: Any = None) -> None:
    from rich.console import Console

    if console is None:
        console = Console()
        console.width = max(console.width, 40 + 22 * MAX_MODE_COLUMNS)  # a pipe reports 80
    for table in build_tables(report):
        console.print(table)
    console.print(
        "Billed = every answered request (the model's and Aider's summarizer's); 'billed, turns"
        " all answered' bills only the turns every mode answered (none refused for the window),"
        " the cost of the same work. Recall for the aider modes counts as a miss (they have none)."
        " Probes match loosely (every content word of the answer in one message or hit) in"
        " every mode; 'verbatim only' is strict."
    )


def plot_points(figures: dict[str, Any]) -> tuple[list[int], list[int]]:
    """(turns, tokens) of the turns that made an answered request: a turn without one (an
    ``/add``, a ``/run`` whose output stays out of the chat, a refused request) has no prompt,
    and drawing it as 0 would draw a dip that never happened."""
    per_turn = figures["prompt_tokens_per_turn"]
    turns = figures.get("request_turns")
    if turns is None:  # a report written before request_turns existed
        turns = [t for t, tokens in enumerate(per_turn, start=1) if tokens]
    return list(turns), [per_turn[t - 1] for t in turns]


def plot(report: dict[str, Any], out: str | Path) -> str:
    """Prompt tokens per turn for each mode, one panel per replay (turns with an answered
    request as a line, refused requests as crosses at the size they had). Returns a one-line
    message (matplotlib is a dev dependency; without it ``--plot`` says so instead of
    failing)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "--plot needs matplotlib, which is not installed; no plot written."
    replays = report["replays"]
    fig, axes = plt.subplots(len(replays), 1, figsize=(9, 3.2 * len(replays)), squeeze=False)
    for ax, (name, entry) in zip(axes[:, 0], replays.items()):
        for mode, figures in entry["modes"].items():
            turns, tokens = plot_points(figures)
            (line,) = ax.plot(turns, tokens, marker=".", markersize=3, label=mode)
            refused = figures.get("overflow_requests") or []
            if refused:
                ax.scatter(
                    [t for t, _ in refused],
                    [n for _, n in refused],
                    marker="x",
                    color=line.get_color(),
                    label=f"{mode}: refused (over the window)",
                )
        window = entry.get("meta", {}).get("max_input_tokens")
        if window:
            ax.axhline(window, color="grey", linestyle=":", label="window")
        ax.set_title(name)
        ax.set_xlabel("turn")
        ax.set_ylabel("prompt tokens")
        ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    return f"plot written to {out}"

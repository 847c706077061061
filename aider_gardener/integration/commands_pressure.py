"""``/context-pressure``: how full the window is. A mixin of ``GardenCommands`` (commands.py)."""

from __future__ import annotations


class PressureCommands:
    def cmd_context_pressure(self, args):
        "Show how full the context window is, by part and by class, and what could be evicted"
        from .report import show_pressure

        show_pressure(self.coder, self.gardener, self.io)

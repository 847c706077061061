"""Evaluation scripts run against the shared third-party data (never shipped in the wheel)."""

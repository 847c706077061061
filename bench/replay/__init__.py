"""The replay benchmark: recorded sessions replayed through real Aider coders, with and without
the gardener, measured side by side: ``python -m bench run`` / ``python -m bench import``.
"""

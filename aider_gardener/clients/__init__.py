"""Front doors other than Aider: an MCP server and Claude Code hooks over the same project store.

The core (classify, compress, store, recall, facts, checkpoints) has no Aider dependency; these
modules only translate another client's protocol into calls on it, so a store written by an
Aider session can be recalled from Claude Code and the other way round.
"""

"""Tests for aider_gardener.classify; a package so names never clash with tests/compress."""

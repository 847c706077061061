import os
import tempfile
import unittest
from pathlib import Path
from unittest.mock import MagicMock

from prompt_toolkit.input import DummyInput
from prompt_toolkit.output import DummyOutput

from aider.dump import dump  # noqa: F401
from aider.gardener.evict import EvictingSummary
from aider.gardener.store import Store
from aider.gardener.store.recall import recall
from aider.history import ChatSummary
from aider.main import main
from aider.utils import GitTemporaryDirectory


def make_model():
    model = MagicMock()
    model.token_count = lambda msg: len(msg["content"] if isinstance(msg, dict) else msg) // 4
    model.info = {"max_input_tokens": 16000}
    return model


def run_output(command, output):
    return f"I ran this command:\n\n{command}\n\nAnd got this output:\n\n{output}"


def pytest_log(failing):
    lines = [f"tests/test_mod{i}.py ........ [{i}%]" for i in range(300)]
    lines += [f"FAILED tests/test_parse.py::{name} - AssertionError" for name in failing]
    lines.append(f"{len(failing)} failed, 2400 passed in 12.01s")
    return "\n".join(lines) + "\n"


def history():
    return [
        dict(role="user", content="Please make the parser accept empty files."),
        dict(role="assistant", content="Ok."),
        dict(role="user", content=run_output("pytest", pytest_log(["test_empty_file"]))),
        dict(role="assistant", content="Ok."),
        dict(role="user", content="Now fix test_empty_file."),
        dict(role="assistant", content="I changed parse() to return {} for an empty file."),
        dict(role="user", content="Thanks, and the README?"),
        dict(role="assistant", content="I added a line about empty files."),
    ]


class TestEvictingSummary(unittest.TestCase):
    def setUp(self):
        self.model = make_model()

    def test_under_budget_is_unchanged(self):
        summary = EvictingSummary(self.model, max_tokens=100_000)
        self.assertEqual(summary.summarize(history()), history())

    def test_compresses_lowest_priority_first_without_llm(self):
        messages = history()
        total = sum(self.model.token_count(m) for m in messages)
        summary = EvictingSummary(self.model, max_tokens=total // 2)
        result = summary.summarize(messages)

        self.assertLessEqual(sum(self.model.token_count(m) for m in result), total // 2)
        self.model.simple_send_with_retries.assert_not_called()
        text = "\n".join(m["content"] for m in result)
        self.assertIn("test_empty_file", text)  # the failing test survives compression
        self.assertIn("pytest", text)
        self.assertEqual(result[0], history()[0])  # the user's prompt outranks the log
        self.assertEqual(result[-4:], history()[-4:])  # the recent turns are untouched
        self.assertNotIn("[full output stored", text)  # no store: no handle to a lost original

    def test_tight_budget_drops_oldest_pairs_and_keeps_alternation(self):
        summary = EvictingSummary(self.model, max_tokens=40)
        result = summary.summarize(history())
        roles = [m["role"] for m in result]
        self.assertEqual(roles, ["user", "assistant"] * (len(roles) // 2))
        self.assertEqual(result[-2:], history()[-2:])
        self.assertLess(len(result), len(history()))

    def test_with_store_originals_are_recallable(self):
        with tempfile.TemporaryDirectory() as tmp:
            store = Store(Path(tmp) / "store.sqlite", vectors=False)
            try:
                messages = history()
                total = sum(self.model.token_count(m) for m in messages)
                summary = EvictingSummary(self.model, max_tokens=total // 2, store=store)
                result = summary.summarize(messages)

                log = next(m["content"] for m in result if "`pytest`" in m["content"])
                self.assertIn("[full output stored: id=", log)
                hits = recall(store, "test_empty_file", limit=1, full=True)
                self.assertIn("2400 passed", hits[0].text)
            finally:
                store.close()

    def test_summarize_all_keeps_every_message(self):
        summary = EvictingSummary(self.model, max_tokens=100)
        result = summary.summarize_all(history())
        self.assertEqual([m["role"] for m in result], [m["role"] for m in history()])
        self.assertLess(len(result[2]["content"]), len(history()[2]["content"]))


class TestHistoryEvictionSetting(unittest.TestCase):
    def setUp(self):
        self.env = os.environ.copy()
        os.environ["OPENAI_API_KEY"] = "deadbeef"

    def tearDown(self):
        os.environ.clear()
        os.environ.update(self.env)

    def run_main(self, *flags):
        with GitTemporaryDirectory():
            return main(
                [*flags, "--exit", "--yes"],
                input=DummyInput(),
                output=DummyOutput(),
                return_coder=True,
            )

    def test_off_by_default(self):
        coder = self.run_main()
        self.assertIs(type(coder.summarizer), ChatSummary)

    def test_flag_selects_eviction(self):
        coder = self.run_main("--history-eviction", "--max-chat-history-tokens", "3000")
        self.assertIsInstance(coder.summarizer, EvictingSummary)
        self.assertEqual(coder.summarizer.max_tokens, 3000)


if __name__ == "__main__":
    unittest.main()

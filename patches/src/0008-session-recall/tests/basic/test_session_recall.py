import os
import tempfile
import unittest
from pathlib import Path
from unittest.mock import MagicMock

from prompt_toolkit.input import DummyInput
from prompt_toolkit.output import DummyOutput

from aider.coders import Coder
from aider.dump import dump  # noqa: F401
from aider.gardener.ingest import StoreIngestHook
from aider.gardener.rag import HEADER, SessionRecall
from aider.gardener.store import Store
from aider.gardener.types import Source
from aider.io import InputOutput
from aider.main import main
from aider.models import Model
from aider.utils import GitTemporaryDirectory

ERROR = (
    "Traceback (most recent call last):\n"
    '  File "app/loader.py", line 12, in load_settings\n'
    "    import tomli\n"
    "ModuleNotFoundError: No module named 'tomli'\n"
)


class TestSessionRecall(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.store = Store(Path(self.tmp.name) / "store.sqlite", vectors=False)

    def tearDown(self):
        self.store.close()
        self.tmp.cleanup()

    def make_coder(self, recall):
        io = InputOutput(yes=True)
        return Coder.create(Model("gpt-3.5-turbo"), None, io, context_recall=recall)

    def test_relevant_stored_context_is_added(self):
        with GitTemporaryDirectory():
            entry = self.store.ingest(ERROR, Source(role="tool", command="python app.py"))
            self.store.ingest("INFO started worker\n" * 50, Source(role="tool", command="make"))
            coder = self.make_coder(SessionRecall(self.store))
            coder.cur_messages = [dict(role="user", content="why does load_settings need tomli?")]

            chunks = coder.format_chat_chunks()
            self.assertEqual(chunks.done[-2]["role"], "user")
            self.assertTrue(chunks.done[-2]["content"].startswith(HEADER))
            self.assertIn(f"id={entry.id}", chunks.done[-2]["content"])
            self.assertNotIn("started worker", chunks.done[-2]["content"])
            self.assertEqual(chunks.done[-1]["role"], "assistant")
            self.assertEqual(coder.done_messages, [])  # the history itself is not changed

    def test_nothing_added_when_already_in_prompt_or_unrelated(self):
        with GitTemporaryDirectory():
            self.store.ingest(ERROR, Source(role="tool"))
            coder = self.make_coder(SessionRecall(self.store))
            coder.done_messages = [
                dict(role="user", content=ERROR),
                dict(role="assistant", content="Ok."),
            ]
            coder.cur_messages = [dict(role="user", content="why does load_settings need tomli?")]
            self.assertEqual(coder.format_chat_chunks().done, coder.done_messages)

            coder.done_messages = []
            coder.cur_messages = [dict(role="user", content="rename the button label")]
            self.assertEqual(coder.format_chat_chunks().done, [])

    def test_budget_limits_what_is_added(self):
        with GitTemporaryDirectory():
            self.store.ingest(ERROR, Source(role="tool"))
            coder = self.make_coder(SessionRecall(self.store, budget=10))
            coder.cur_messages = [dict(role="user", content="why does load_settings need tomli?")]
            self.assertEqual(coder.format_chat_chunks().done, [])

    def test_failing_recall_is_disabled(self):
        with GitTemporaryDirectory():
            broken = MagicMock(side_effect=RuntimeError("index gone"))
            coder = self.make_coder(broken)
            coder.io.tool_warning = MagicMock()
            coder.cur_messages = [dict(role="user", content="hello")]
            coder.format_chat_chunks()
            coder.format_chat_chunks()
            broken.assert_called_once()
            self.assertIsNone(coder.context_recall)
            coder.io.tool_warning.assert_called_once()


class TestContextSettings(unittest.TestCase):
    def setUp(self):
        self.env = os.environ.copy()
        os.environ["OPENAI_API_KEY"] = "deadbeef"

    def tearDown(self):
        os.environ.clear()
        os.environ.update(self.env)

    def run_main(self, *flags):
        return main(
            [*flags, "--exit", "--yes"],
            input=DummyInput(),
            output=DummyOutput(),
            return_coder=True,
        )

    def test_off_by_default(self):
        with GitTemporaryDirectory() as root:
            coder = self.run_main()
            self.assertEqual(coder.context_hooks, [])
            self.assertIsNone(coder.context_recall)
            self.assertFalse((Path(root) / ".aider.gardener").exists())

    def test_recall_installs_store_hook_and_recall(self):
        with GitTemporaryDirectory() as root:
            coder = self.run_main("--context-recall", "--history-eviction")
            self.assertIsInstance(coder.context_recall, SessionRecall)
            hooks = [h for h in coder.context_hooks if isinstance(h, StoreIngestHook)]
            self.assertEqual(len(hooks), 1)
            self.assertIs(coder.summarizer.store, coder.context_recall.store)
            self.assertTrue((Path(root) / ".aider.gardener").is_dir())
            coder.context_recall.store.close()


if __name__ == "__main__":
    unittest.main()

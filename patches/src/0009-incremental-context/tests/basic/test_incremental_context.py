import os
import tempfile
import unittest
from pathlib import Path

from prompt_toolkit.input import DummyInput
from prompt_toolkit.output import DummyOutput

from aider.coders import Coder
from aider.dump import dump  # noqa: F401
from aider.gardener.incremental import HEADER, IncrementalView
from aider.gardener.ingest import StoreIngestHook
from aider.gardener.store import Store
from aider.gardener.tokens import count_tokens
from aider.io import InputOutput
from aider.main import main
from aider.models import Model
from aider.utils import GitTemporaryDirectory


def turns(count):
    messages = []
    for i in range(count):
        output = "".join(f"INFO step {j} of build {i} ok\n" for j in range(200))
        messages += [
            dict(role="user", content=f"Please fix issue number {i} in parser.py"),
            dict(role="assistant", content=f"I fixed issue {i} by changing parse().\nDetails..."),
            dict(
                role="user",
                content=f"I ran this command:\n\nmake build{i}\n\nAnd got this output:\n\n"
                + output,
            ),
            dict(role="assistant", content="Ok."),
        ]
    return messages


class TestIncrementalView(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.store = Store(Path(self.tmp.name) / "store.sqlite", vectors=False)
        self.hook = StoreIngestHook(self.store)

    def tearDown(self):
        self.store.close()
        self.tmp.cleanup()

    def make_coder(self, view):
        coder = Coder.create(
            Model("gpt-3.5-turbo"),
            None,
            InputOutput(yes=True),
            context_hooks=[self.hook],
            history_view=view,
        )
        return coder

    def test_old_turns_compiled_recent_turns_verbatim(self):
        with GitTemporaryDirectory():
            coder = self.make_coder(IncrementalView(self.hook, recent_turns=2))
            coder.done_messages = turns(6)
            chunks = coder.format_chat_chunks()

            self.assertTrue(chunks.done[0]["content"].startswith(HEADER))
            self.assertEqual(chunks.done[1]["role"], "assistant")
            self.assertEqual(chunks.done[2:], turns(6)[-8:])
            summary = chunks.done[0]["content"]
            self.assertIn("- You said: Please fix issue number 0 in parser.py [id=", summary)
            self.assertIn("Output of `make build3`", summary)
            self.assertNotIn("issue number 4", summary)
            self.assertEqual(len(coder.done_messages), 24)  # a view: the history is kept

            sent = coder.main_model.token_count(chunks.all_messages())
            coder.history_view = None
            full = coder.main_model.token_count(coder.format_chat_chunks().all_messages())
            self.assertLess(sent, full / 2)

    def test_prompt_stays_about_constant(self):
        with GitTemporaryDirectory():
            coder = self.make_coder(IncrementalView(self.hook, recent_turns=2))
            sizes = []
            for n in (4, 8, 16):
                coder.done_messages = turns(n)
                sizes.append(coder.main_model.token_count(coder.format_chat_chunks().done))
            self.assertLess(sizes[2] - sizes[0], sizes[0])

    def test_few_turns_unchanged(self):
        with GitTemporaryDirectory():
            coder = self.make_coder(IncrementalView(self.hook, recent_turns=3))
            coder.done_messages = turns(2)
            self.assertEqual(coder.format_chat_chunks().done, turns(2))

    def test_cap_drops_oldest_lines(self):
        view = IncrementalView(None, recent_turns=1)
        text = view.compile(turns(40), cap=300, model="gpt-3.5-turbo")
        self.assertIn("older lines omitted", text)
        self.assertIn("- You said: Please fix issue number 39 in parser.py", text)
        self.assertIn("Output of `make build39`: INFO step 0 of build 39 ok", text)
        self.assertNotIn("issue number 0 ", text)
        self.assertLessEqual(count_tokens(text, "gpt-3.5-turbo"), 300)


class TestIncrementalSetting(unittest.TestCase):
    def setUp(self):
        self.env = os.environ.copy()
        os.environ["OPENAI_API_KEY"] = "deadbeef"

    def tearDown(self):
        os.environ.clear()
        os.environ.update(self.env)

    def test_flag_installs_the_view(self):
        with GitTemporaryDirectory():
            coder = main(
                ["--incremental-context", "--exit", "--yes"],
                input=DummyInput(),
                output=DummyOutput(),
                return_coder=True,
            )
            self.assertIsInstance(coder.history_view, IncrementalView)
            self.assertIs(coder.history_view.hook, coder.context_hooks[0])
            coder.history_view.hook.store.close()

    def test_off_by_default(self):
        with GitTemporaryDirectory():
            coder = main(
                ["--exit", "--yes"], input=DummyInput(), output=DummyOutput(), return_coder=True
            )
            self.assertIsNone(coder.history_view)


if __name__ == "__main__":
    unittest.main()

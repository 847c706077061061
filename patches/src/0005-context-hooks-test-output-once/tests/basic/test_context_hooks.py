import tempfile
import unittest
from pathlib import Path
from unittest.mock import MagicMock, patch

from aider.coders import Coder
from aider.dump import dump  # noqa: F401
from aider.gardener.ingest import StoreIngestHook
from aider.gardener.store import Store
from aider.gardener.store.recall import recall
from aider.io import InputOutput
from aider.models import Model
from aider.utils import GitTemporaryDirectory


class TestContextHooks(unittest.TestCase):
    def setUp(self):
        self.GPT35 = Model("gpt-3.5-turbo")

    def make_coder(self, **kwargs):
        io = InputOutput(yes=True)
        io.tool_warning = MagicMock()
        return Coder.create(self.GPT35, None, io, **kwargs)

    def test_hook_runs_before_each_request(self):
        with GitTemporaryDirectory():
            hook = MagicMock()
            coder = self.make_coder(context_hooks=[hook])
            coder.format_chat_chunks()
            hook.assert_called_once_with(coder)

    def test_hook_sees_messages_before_they_move_to_history(self):
        with GitTemporaryDirectory():
            seen = []

            def hook(coder):
                seen.append((len(coder.done_messages), len(coder.cur_messages)))

            coder = self.make_coder(context_hooks=[hook])
            coder.cur_messages = [
                dict(role="user", content="hi"),
                dict(role="assistant", content="hello"),
            ]
            coder.move_back_cur_messages("I committed the changes")
            self.assertEqual(seen, [(0, 2)])
            self.assertEqual(len(coder.done_messages), 4)

    def test_failing_hook_is_disabled_not_fatal(self):
        with GitTemporaryDirectory():
            good = MagicMock()

            def broken(coder):
                raise RuntimeError("boom")

            coder = self.make_coder(context_hooks=[broken, good])
            coder.format_chat_chunks()
            coder.format_chat_chunks()

            self.assertEqual(coder.context_hooks, [good])
            self.assertEqual(good.call_count, 2)
            coder.io.tool_warning.assert_called_once()
            self.assertIn("boom", coder.io.tool_warning.call_args[0][0])

    def test_hooks_survive_a_coder_switch(self):
        with GitTemporaryDirectory():
            hook = MagicMock()
            coder = self.make_coder(context_hooks=[hook])
            switched = Coder.create(from_coder=coder, edit_format="ask")
            self.assertEqual(switched.context_hooks, [hook])

    def test_test_output_is_sent_once(self):
        with GitTemporaryDirectory():
            coder = self.make_coder()
            sent = []

            def mock_send(messages, functions=None):
                sent.append(messages)
                coder.partial_response_content = "I will fix it"
                coder.partial_response_function_call = dict()
                return []

            coder.send = mock_send
            coder.reflected_message = None
            with patch("aider.commands.run_cmd", return_value=(1, "FAILED test_x.py::test_y\n")):
                msg = coder.commands.cmd_test("pytest")
            self.assertIn("FAILED test_x.py::test_y", msg)
            list(coder.send_message(msg))

            contents = [m["content"] for m in sent[0] if isinstance(m.get("content"), str)]
            self.assertEqual(sum("FAILED test_x.py::test_y" in c for c in contents), 1)
            self.assertEqual(sum(c == msg for c in contents), 1)

    def test_run_output_added_earlier_is_kept(self):
        # Only an exact copy directly before the message is dropped.
        with GitTemporaryDirectory():
            coder = self.make_coder()
            sent = []

            def mock_send(messages, functions=None):
                sent.append(messages)
                coder.partial_response_content = "ok"
                coder.partial_response_function_call = dict()
                return []

            coder.send = mock_send
            earlier = [
                dict(role="user", content="I ran this command:\n\nls\n\nAnd got this output:\n\nx"),
                dict(role="assistant", content="Ok."),
            ]
            coder.cur_messages = list(earlier)
            coder.reflected_message = None
            question = dict(role="user", content="why is x there?")
            list(coder.send_message(question["content"]))
            at = sent[0].index(question)
            self.assertEqual(sent[0][at - 2 : at], earlier)


class TestStoreIngestHook(unittest.TestCase):
    def test_every_message_stored_once(self):
        with GitTemporaryDirectory(), tempfile.TemporaryDirectory() as tmp:
            store = Store(Path(tmp) / "store.sqlite", vectors=False)
            try:
                hook = StoreIngestHook(store)
                coder = Coder.create(Model("gpt-3.5-turbo"), None, InputOutput(yes=True))
                coder.context_hooks.append(hook)
                run = dict(
                    role="user",
                    content="I ran this command:\n\nmake\n\nAnd got this output:\n\n"
                    "src/parse.c:12: error: expected ';'\n",
                )
                coder.done_messages = [run, dict(role="assistant", content="Ok.")]
                coder.format_chat_chunks()
                coder.format_chat_chunks()

                self.assertEqual(len(hook.entries), 2)
                entry = hook.entry(run)
                self.assertEqual(entry.command, "make")
                self.assertEqual(entry.role, "tool")
                hits = recall(store, "parse.c", limit=1, full=True)
                self.assertIn("expected ';'", hits[0].text)
            finally:
                store.close()


if __name__ == "__main__":
    unittest.main()

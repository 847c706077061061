import threading
import unittest
from unittest.mock import MagicMock

from aider.coders import Coder
from aider.dump import dump  # noqa: F401
from aider.io import InputOutput
from aider.models import Model
from aider.utils import GitTemporaryDirectory

SUMMARY = [
    dict(role="user", content="I spoke to you previously about a number of things."),
    dict(role="assistant", content="Ok."),
]


def history(turns):
    messages = []
    for i in range(turns):
        messages += [
            dict(role="user", content=f"question {i}"),
            dict(role="assistant", content=f"answer {i}"),
        ]
    return messages


class TestSummarizerThread(unittest.TestCase):
    def setUp(self):
        self.GPT35 = Model("gpt-3.5-turbo")

    def make_coder(self, summarize):
        io = InputOutput(yes=True)
        io.tool_warning = MagicMock()
        coder = Coder.create(self.GPT35, None, io)
        coder.summarizer = MagicMock()
        coder.summarizer.too_big.return_value = True
        coder.summarizer.summarize.side_effect = summarize
        return coder

    def test_summary_kept_when_commit_notice_appended(self):
        # move_back_cur_messages() appends the commit notice right after starting the
        # summarizer; the summary must replace the old turns and keep the notice.
        with GitTemporaryDirectory():
            release = threading.Event()

            def summarize(messages):
                release.wait(5)
                return list(SUMMARY)

            coder = self.make_coder(summarize)
            coder.done_messages = history(3)
            coder.cur_messages = history(1)
            coder.move_back_cur_messages("I committed the changes with git hash abc123")
            release.set()
            coder.summarize_end()

            self.assertEqual(coder.done_messages[:2], SUMMARY)
            self.assertEqual(len(coder.done_messages), 4)
            self.assertIn("abc123", coder.done_messages[2]["content"])
            self.assertEqual(coder.done_messages[3]["role"], "assistant")

    def test_summary_covers_only_the_snapshot(self):
        with GitTemporaryDirectory():
            seen = []

            def summarize(messages):
                seen.append(list(messages))
                return list(SUMMARY)

            coder = self.make_coder(summarize)
            coder.done_messages = history(2)
            coder.summarize_start()
            coder.done_messages += [dict(role="user", content="later")]
            coder.summarize_end()

            self.assertEqual(seen, [history(2)])
            self.assertEqual(coder.done_messages, SUMMARY + [dict(role="user", content="later")])

    def test_failed_summary_keeps_history(self):
        for err in (ValueError("summarizer unexpectedly failed for all models"), KeyError("x")):
            with self.subTest(err=type(err).__name__), GitTemporaryDirectory():

                def summarize(messages):
                    raise err

                coder = self.make_coder(summarize)
                coder.done_messages = history(3)
                coder.summarize_start()
                coder.summarize_end()

                self.assertEqual(coder.done_messages, history(3))
                coder.io.tool_warning.assert_called_once()

    def test_empty_summary_keeps_history(self):
        with GitTemporaryDirectory():
            coder = self.make_coder(lambda messages: [])
            coder.done_messages = history(2)
            coder.summarize_start()
            coder.summarize_end()

            self.assertEqual(coder.done_messages, history(2))

    def test_summary_dropped_when_history_cleared(self):
        with GitTemporaryDirectory():
            release = threading.Event()

            def summarize(messages):
                release.wait(5)
                return list(SUMMARY)

            coder = self.make_coder(summarize)
            coder.done_messages = history(3)
            coder.summarize_start()
            coder.done_messages = []  # /clear
            release.set()
            coder.summarize_end()

            self.assertEqual(coder.done_messages, [])

    def test_thread_is_daemon(self):
        with GitTemporaryDirectory():
            release = threading.Event()

            def summarize(messages):
                release.wait(5)
                return list(SUMMARY)

            coder = self.make_coder(summarize)
            coder.done_messages = history(2)
            coder.summarize_start()
            try:
                self.assertTrue(coder.summarizer_thread.daemon)
            finally:
                release.set()
                coder.summarize_end()
            self.assertIsNone(coder.summarizer_thread)


if __name__ == "__main__":
    unittest.main()

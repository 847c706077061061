import re
import unittest
from pathlib import Path

from aider.coders import Coder
from aider.coders.base_coder import CONTEXT_PARTS
from aider.commands import Commands
from aider.dump import dump  # noqa: F401
from aider.io import InputOutput
from aider.models import Model
from aider.utils import GitTemporaryDirectory


def capture(io):
    lines = []
    io.tool_output = lambda *args, **kwargs: lines.append(" ".join(str(a) for a in args))
    io.tool_warning = lambda msg, *args, **kwargs: lines.append("WARNING " + msg)
    return lines


class TestContextBudget(unittest.TestCase):
    def setUp(self):
        self.GPT35 = Model("gpt-3.5-turbo")

    def make_coder(self):
        io = InputOutput(pretty=False, fancy_input=False, yes=True)
        coder = Coder.create(self.GPT35, None, io)
        return coder, Commands(io, coder)

    def test_budget_counts_the_formatted_prompt(self):
        with GitTemporaryDirectory():
            coder, _ = self.make_coder()
            before = coder.context_budget()

            self.assertEqual(set(before["parts"]), set(CONTEXT_PARTS))
            self.assertEqual(
                before["total"],
                coder.main_model.token_count(coder.format_messages().all_messages()),
            )
            self.assertGreater(before["parts"]["system"], 0)
            self.assertEqual(before["parts"]["done"], 0)
            self.assertEqual(before["remaining"], before["limit"] - before["total"])

            text = "the parser rejects empty files " * 200
            coder.done_messages = [
                dict(role="user", content=text),
                dict(role="assistant", content="Ok."),
            ]
            after = coder.context_budget()
            grown = after["total"] - before["total"]
            self.assertGreaterEqual(grown, coder.main_model.token_count(text))
            self.assertGreaterEqual(after["parts"]["done"], coder.main_model.token_count(text))

    def test_tokens_reports_the_real_prompt(self):
        with GitTemporaryDirectory():
            Path("notes.txt").write_text("hello\n" * 50)
            coder, commands = self.make_coder()
            commands.cmd_add("notes.txt")
            lines = capture(coder.io)
            commands.cmd_tokens("")

            sent = next(
                line for line in lines if "tokens in the prompt as it would be sent" in line
            )
            total = int(re.search(r"([\d,]+) tokens in the prompt", sent).group(1).replace(",", ""))
            self.assertEqual(total, coder.context_budget()["total"])

            remaining = next(line for line in lines if "tokens remaining" in line)
            left = int(
                re.search(r"(-?[\d,]+) tokens remaining", remaining).group(1).replace(",", "")
            )
            self.assertEqual(left, coder.context_budget()["limit"] - total)

    def test_context_pressure_shows_parts_and_largest_messages(self):
        with GitTemporaryDirectory():
            coder, commands = self.make_coder()
            big = "Traceback (most recent call last):\n" + "  frame\n" * 400
            coder.done_messages = [
                dict(role="user", content="short question"),
                dict(role="assistant", content="short answer"),
                dict(role="user", content=big),
                dict(role="assistant", content="Ok."),
            ]
            lines = capture(coder.io)
            commands.cmd_context_pressure("")

            self.assertRegex(lines[0], r"^[\d,]+ of [\d,]+ tokens \(\d+%\) of the gpt-3.5-turbo")
            self.assertTrue(any(line.endswith("chat history") for line in lines))
            at = lines.index("Largest messages in the chat:")
            self.assertIn("#3 user: Traceback (most recent call last):", lines[at + 1])
            self.assertFalse(any(line.startswith("WARNING") for line in lines))

    def test_context_pressure_warns_when_nearly_full(self):
        with GitTemporaryDirectory():
            coder, commands = self.make_coder()
            total = coder.context_budget()["total"]
            coder.main_model.info = dict(coder.main_model.info, max_input_tokens=total + 10)
            lines = capture(coder.io)
            commands.cmd_context_pressure("")
            self.assertTrue(any(line.startswith("WARNING") for line in lines))

    def test_command_is_listed(self):
        with GitTemporaryDirectory():
            _, commands = self.make_coder()
            self.assertIn("/context-pressure", commands.get_commands())


if __name__ == "__main__":
    unittest.main()

import unittest

import aider.coders as coders
from aider.coders import AskCoder, Coder, EditBlockCoder, register_coder
from aider.commands import Commands
from aider.dump import dump  # noqa: F401
from aider.io import InputOutput
from aider.models import Model
from aider.utils import GitTemporaryDirectory


class MyCommands(Commands):
    def cmd_hello(self, args):
        "Say hello"
        self.io.tool_output("hello")


class MyEditBlockCoder(EditBlockCoder):
    """A diff coder with extra behaviour"""


class MyNewFormatCoder(Coder):
    edit_format = "my-new-format"


class TestCommandsClone(unittest.TestCase):
    def test_clone_keeps_subclass_and_voice_args(self):
        io = InputOutput(pretty=False, fancy_input=False, yes=True)
        commands = MyCommands(
            io,
            None,
            voice_language="de",
            voice_input_device="mic 2",
            voice_format="mp3",
            verify_ssl=False,
        )
        clone = commands.clone()

        self.assertIs(type(clone), MyCommands)
        self.assertIsNot(clone, commands)
        self.assertIsNone(clone.coder)
        self.assertEqual(clone.voice_language, "de")
        self.assertEqual(clone.voice_input_device, "mic 2")
        self.assertEqual(clone.voice_format, "mp3")
        self.assertFalse(clone.verify_ssl)
        self.assertIn("/hello", clone.get_commands())

    def test_switching_coders_keeps_custom_commands(self):
        with GitTemporaryDirectory():
            io = InputOutput(pretty=False, fancy_input=False, yes=True)
            model = Model("gpt-3.5-turbo")
            coder = Coder.create(model, "diff", io, commands=MyCommands(io, None))
            switched = Coder.create(from_coder=coder, edit_format="ask")

            self.assertIsInstance(switched, AskCoder)
            self.assertIs(type(switched.commands), MyCommands)


class TestRegisterCoder(unittest.TestCase):
    def setUp(self):
        self.saved = list(coders.__all__)

    def tearDown(self):
        coders.__all__[:] = self.saved

    def test_replaces_the_class_for_its_edit_format(self):
        position = coders.__all__.index(EditBlockCoder)
        replaced = register_coder(MyEditBlockCoder)

        self.assertIs(replaced, EditBlockCoder)
        self.assertIs(coders.__all__[position], MyEditBlockCoder)
        self.assertNotIn(EditBlockCoder, coders.__all__)
        self.assertEqual(len(coders.__all__), len(self.saved))

        with GitTemporaryDirectory():
            io = InputOutput(pretty=False, fancy_input=False, yes=True)
            coder = Coder.create(Model("gpt-3.5-turbo"), "diff", io)
            self.assertIsInstance(coder, MyEditBlockCoder)

    def test_adds_a_new_edit_format(self):
        self.assertIsNone(register_coder(MyNewFormatCoder))
        self.assertIs(coders.__all__[-1], MyNewFormatCoder)

        with GitTemporaryDirectory():
            io = InputOutput(pretty=False, fancy_input=False, yes=True)
            coder = Coder.create(Model("gpt-3.5-turbo"), "my-new-format", io)
            self.assertIsInstance(coder, MyNewFormatCoder)

    def test_rejects_non_coders(self):
        with self.assertRaises(TypeError):
            register_coder(object)
        with self.assertRaises(TypeError):
            register_coder("diff")  # a name, not a class
        self.assertEqual(coders.__all__, self.saved)


if __name__ == "__main__":
    unittest.main()

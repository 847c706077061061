import unittest

from aider.dump import dump  # noqa: F401
from aider.gardener import CompressOptions, ContentClass, Source, compress, count_tokens
from aider.gardener.types import HANDLE_PREFIX


def pytest_run(failing):
    lines = ["============================= test session starts =============================="]
    lines += ["platform linux -- Python 3.12.0, pytest-8.3.0", "collected 300 items", ""]
    for i in range(30):
        lines.append(f"tests/test_mod{i}.py " + "." * 10 + f" [{(i + 1) * 3}%]")
    lines += [
        "",
        "=================================== FAILURES ===================================",
    ]
    for name in failing:
        lines += [
            f"____________________________ {name} ____________________________",
            "",
            "    def test_it():",
            ">       assert parse_config('x') == 2",
            "E       AssertionError: assert 1 == 2",
            "",
            "app/config.py:42: AssertionError",
        ]
    lines.append("=========================== short test summary info ============================")
    for name in failing:
        lines.append(f"FAILED tests/test_config.py::{name} - AssertionError: assert 1 == 2")
    lines.append(f"{len(failing)} failed, {300 - len(failing)} passed in 3.21s")
    return "\n".join(lines) + "\n"


TRACEBACK = """Traceback (most recent call last):
  File "/home/me/proj/app/main.py", line 10, in <module>
    main()
  File "/home/me/proj/app/main.py", line 7, in main
    load("settings.toml")
  File "/usr/lib/python3.12/json/__init__.py", line 293, in load
    return loads(fp.read())
ModuleNotFoundError: No module named 'tomli'
"""


class TestGardenerCompress(unittest.TestCase):
    def test_test_run_keeps_failures_and_shrinks(self):
        failing = ["test_parse_empty", "test_parse_unicode"]
        text = pytest_run(failing)
        result = compress(text, Source(role="tool", command="pytest"))

        self.assertLess(result.tokens_summary, result.tokens_original)
        for name in failing:
            self.assertIn(name, result.summary)
        self.assertIn("app/config.py:42", result.summary)
        self.assertIn(HANDLE_PREFIX, result.summary)

    def test_traceback_keeps_exception(self):
        result = compress(TRACEBACK, Source(role="tool"))
        self.assertIn("ModuleNotFoundError: No module named 'tomli'", result.summary)
        self.assertLessEqual(len(result.summary), len(TRACEBACK))

    def test_never_longer_and_idempotent(self):
        samples = [
            "",
            "x",
            "\x1b[31mred\x1b[0m error: E0432 unresolved import\n",
            "line\n" * 5000,
            "a" * 200_000,
            '{"items": ['
            + ",".join('{"id": %d, "name": "n%d"}' % (i, i) for i in range(500))
            + "]}",
            pytest_run(["test_one"]),
            TRACEBACK,
        ]
        for text in samples:
            with self.subTest(text=text[:30]):
                first = compress(text)
                self.assertLessEqual(len(first.summary), len(text))
                self.assertLessEqual(first.tokens_summary, first.tokens_original)
                second = compress(first.summary)
                self.assertLessEqual(len(second.summary), len(first.summary))

    def test_bytes_do_not_crash(self):
        data = bytes(range(256)) * 20
        result = compress(data)
        self.assertLessEqual(len(result.summary), len(data))
        self.assertLessEqual(count_tokens(result.summary), result.tokens_original)

    def test_forced_class(self):
        text = "The parser failed on an empty file. We should return an empty config instead.\n"
        result = compress(text, opts=CompressOptions(), cls=ContentClass.PROSE)
        self.assertEqual(result.cls, ContentClass.PROSE)

    def test_same_input_same_id(self):
        self.assertEqual(compress(TRACEBACK).entry_id, compress(TRACEBACK).entry_id)
        self.assertNotEqual(compress(TRACEBACK).entry_id, compress(TRACEBACK + "x").entry_id)


if __name__ == "__main__":
    unittest.main()

import os
import stat
import tempfile
import unittest
from pathlib import Path

from aider.dump import dump  # noqa: F401
from aider.gardener.store import Store
from aider.gardener.store.recall import recall
from aider.gardener.types import Source

LOG = "".join(f"INFO worker {i % 4} processed batch {i} in {i % 7}ms\n" for i in range(400))
ERROR = (
    "Traceback (most recent call last):\n"
    '  File "app/loader.py", line 12, in load_settings\n'
    "    import tomli\n"
    "ModuleNotFoundError: No module named 'tomli'\n"
)


class TestGardenerStore(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.store = Store(Path(self.tmp.name) / "store.sqlite", vectors=False)

    def tearDown(self):
        self.store.close()
        self.tmp.cleanup()

    def test_ingest_keeps_original_recallable(self):
        entry = self.store.ingest(LOG, Source(role="tool", command="make"))

        self.assertTrue(entry.stored)
        self.assertLess(entry.tokens_summary, entry.tokens_original)
        self.assertIn(entry.id, entry.summary)
        self.assertEqual(self.store.get(entry.id).original, LOG)

    def test_same_output_is_one_entry(self):
        first = self.store.ingest(ERROR, Source(role="tool"))
        second = self.store.ingest(ERROR, Source(role="tool"))
        self.assertEqual(first.id, second.id)
        self.assertEqual(len(self.store.list_entries()), 1)

    def test_full_text_recall_finds_identifiers(self):
        self.store.ingest(LOG, Source(role="tool", command="make"))
        error = self.store.ingest(ERROR, Source(role="tool", command="python app.py"))

        hits = recall(self.store, "tomli load_settings", limit=3)
        self.assertTrue(hits)
        self.assertEqual(hits[0].entry_id, error.id)

        full = recall(self.store, "tomli", limit=1, full=True)
        self.assertIn("No module named 'tomli'", full[0].text)

    def test_forget_hides_from_recall(self):
        error = self.store.ingest(ERROR, Source(role="tool"))
        self.assertTrue(self.store.forget(error.id))
        self.assertEqual(recall(self.store, "tomli"), [])

    def test_odd_queries_do_not_raise(self):
        self.store.ingest(ERROR, Source(role="tool"))
        for query in ['"', "NEAR(", "a OR", "*", "", "\x00", "app/loader.py:12"]:
            with self.subTest(query=query):
                self.assertIsInstance(recall(self.store, query), list)

    @unittest.skipIf(os.name == "nt", "POSIX permissions")
    def test_store_file_is_private(self):
        self.store.ingest(ERROR, Source(role="tool"))
        mode = stat.S_IMODE(os.stat(Path(self.tmp.name) / "store.sqlite").st_mode)
        self.assertEqual(mode & 0o077, 0)


if __name__ == "__main__":
    unittest.main()

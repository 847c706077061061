"""The numeric stack is imported before the gardener's threads start (a thread-import race)."""

import subprocess
import sys
import textwrap


def test_opening_a_store_preloads_numpy_scipy_networkx(tmp_path):
    code = textwrap.dedent(f"""
        import sys
        from aider_gardener.store import Store
        assert "networkx" not in sys.modules
        store = Store(root={str(tmp_path)!r}, vectors=False)
        assert {{"numpy", "scipy.sparse", "networkx"}} <= set(sys.modules)
        store.close()
        print("OK")
        """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().endswith("OK")

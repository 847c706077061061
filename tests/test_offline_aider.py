"""aider-gardener never lets Aider fetch litellm's price list: the bundled copy is used."""

import subprocess
import sys
import textwrap


def test_model_info_comes_from_litellm_bundle_without_network(tmp_path):
    code = textwrap.dedent("""
        import socket
        def deny(*a, **k):
            raise RuntimeError("network access attempted")
        socket.socket.connect = deny
        socket.create_connection = deny
        socket.getaddrinfo = deny
        import aider_gardener.offline as offline
        offline.keep_aider_offline()
        from aider import models
        info = models.model_info_manager.get_model_info("gpt-4o")
        assert info.get("max_input_tokens", 0) >= 100000, info
        print("OK")
        """)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().endswith("OK")
    for trace in ("network access attempted", "githubusercontent", "ConnectionPool"):
        assert trace not in out.stdout + out.stderr

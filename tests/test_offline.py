"""Nothing may try the network at import or run time: prove it with sockets disabled."""

import subprocess
import sys
import textwrap


def test_import_count_and_compress_with_network_disabled(tmp_path):
    code = textwrap.dedent("""
        import os, socket
        for k in ("TIKTOKEN_CACHE_DIR", "LITELLM_LOCAL_MODEL_COST_MAP", "HF_HUB_OFFLINE"):
            os.environ.pop(k, None)
        def deny(*a, **k):
            raise RuntimeError("network access attempted")
        socket.socket.connect = deny
        socket.create_connection = deny
        socket.getaddrinfo = deny
        import aider_gardener
        from aider_gardener import count_tokens
        from aider_gardener.pipeline import compress
        assert os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
        assert os.environ["HF_HUB_OFFLINE"] == "1"
        assert count_tokens("hello world", "gpt-4o") > 0
        assert count_tokens("hello world", "claude-3-5-sonnet") > 0
        r = compress("INFO step 1 ok\\n" * 500 + "ERROR boom\\n")
        assert "boom" in r.summary
        print("OK")
        """)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().endswith("OK")


def test_env_for_child_processes_has_every_switch_and_one_thread():
    from aider_gardener import offline

    env = offline.env()
    assert env["HF_HUB_OFFLINE"] == "1" and env["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
    assert env["AIDER_CHECK_UPDATE"] == "false" and env["ANONYMIZED_TELEMETRY"] == "False"
    assert env["OMP_NUM_THREADS"] == env["GARDENER_TORCH_THREADS"] == "1"
    assert offline.env(threads=2)["MKL_NUM_THREADS"] == "2"

"""Offline by construction: every switch the gardener's dependencies need, set before first use.

Imported for its side effect by ``aider_gardener/__init__.py``, so ``import aider_gardener`` is
enough. Values are set with ``setdefault`` except where a user value would make us reach the
network: a user may point tiktoken at another *populated* cache, but an empty one would trigger a
download, so an unset or missing cache dir is replaced by litellm's bundled encodings.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

_DEFAULTS = {
    # litellm fetches its model price map from GitHub at import time unless told not to.
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    # Aider: no version check, no analytics prompt or upload.
    "AIDER_CHECK_UPDATE": "false",
    "AIDER_ANALYTICS_DISABLE": "true",
    "AIDER_ANALYTICS": "false",
    # Hugging Face / sentence-transformers: weights come only from installed packages.
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    # chromadb's posthog telemetry.
    "ANONYMIZED_TELEMETRY": "False",
    "TOKENIZERS_PARALLELISM": "false",
}


def env(threads: int = 1) -> dict[str, str]:
    """The switches above plus one thread count for every numeric library: the environment a
    benchmark or test gives the processes it starts (the machine has few cores to share)."""
    n = str(int(threads))
    return {**_DEFAULTS, "OMP_NUM_THREADS": n, "MKL_NUM_THREADS": n, "GARDENER_TORCH_THREADS": n}


def litellm_tiktoken_dir() -> Path | None:
    """litellm ships tiktoken's cl100k_base and o200k_base files under the names tiktoken caches
    them by, so pointing TIKTOKEN_CACHE_DIR there makes tiktoken load them without a download.
    Found via the import system without importing litellm (which takes seconds)."""
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / "litellm_core_utils" / "tokenizers"
    return path if path.is_dir() else None


def apply() -> None:
    for key, value in _DEFAULTS.items():
        os.environ.setdefault(key, value)
    current = os.environ.get("TIKTOKEN_CACHE_DIR")
    if not current or not Path(current).is_dir() or not any(Path(current).iterdir()):
        bundled = litellm_tiktoken_dir()
        if bundled is not None:
            os.environ["TIKTOKEN_CACHE_DIR"] = str(bundled)


apply()


def keep_aider_offline() -> None:
    """Aider 0.86.2 downloads litellm's model price list from GitHub whenever its copy under
    ``~/.aider/caches`` is missing or a day old. litellm ships the same file (and
    LITELLM_LOCAL_MODEL_COST_MAP makes litellm use it), so Aider is given that instead: the same
    data, no request. Applied by ``aider-gardener`` in every mode, ``off`` included."""
    from aider import models

    def _update_cache(self) -> None:
        import litellm

        self.content = dict(litellm.model_cost)

    models.ModelInfoManager._update_cache = _update_cache

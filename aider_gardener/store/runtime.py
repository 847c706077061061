"""What background work needs from the process: a lower thread priority, and chromadb lean.

Both the embedding preload and the indexing worker run beside the user's session on a machine
that may have two cores, and both need chromadb without the tracing exporter it imports for a
setting that is off. They live here, below the modules that use them, so that the embedding
model, the vector index and the worker import one way.
"""

from __future__ import annotations

import os
import threading
from typing import Any

NICE = 10  # added to a background thread's niceness (Linux: per thread)


def lower_thread_priority(nice: int = NICE) -> bool:
    """Raise the calling thread's niceness by ``nice`` (Linux schedules threads separately;
    elsewhere this may apply to the whole process, so it is only done on Linux)."""
    if not hasattr(os, "setpriority") or not os.uname().sysname == "Linux":
        return False
    try:
        tid = threading.get_native_id()
        now = os.getpriority(os.PRIO_PROCESS, tid)
        os.setpriority(os.PRIO_PROCESS, tid, min(19, now + nice))
        return True
    except OSError:
        return False


# chromadb imports OpenTelemetry's gRPC span exporter (with grpc and protobuf) at import time, for
# a tracing setting (``chroma_otel_granularity``) that is off unless configured: memory for
# nothing (decision 084). A placeholder module stands in until the exporter is really
# constructed, which then imports the real one.
_OTLP_EXPORTER = "opentelemetry.exporter.otlp.proto.grpc.trace_exporter"


def _real_otlp_exporter(*args: Any, **kwargs: Any) -> Any:
    import importlib
    import sys

    if getattr(sys.modules.get(_OTLP_EXPORTER), "_gardener_placeholder", False):
        del sys.modules[_OTLP_EXPORTER]
    module = importlib.import_module(_OTLP_EXPORTER)
    return module.OTLPSpanExporter(*args, **kwargs)


def import_chromadb() -> Any:
    """``import chromadb`` without the gRPC exporter it only needs when tracing is on."""
    import sys
    import types

    if "chromadb" not in sys.modules and _OTLP_EXPORTER not in sys.modules:
        placeholder = types.ModuleType(_OTLP_EXPORTER)
        placeholder.OTLPSpanExporter = _real_otlp_exporter  # type: ignore[attr-defined]
        placeholder._gardener_placeholder = True  # type: ignore[attr-defined]
        sys.modules[_OTLP_EXPORTER] = placeholder
    import chromadb

    return chromadb

"""Provider batch APIs: half the price, no rate limits, resumable (``harness batch``).

``wire.py`` holds the request and result formats of OpenAI's Batch API (also vLLM ``run_batch``'s)
and Anthropic's Message Batches; ``providers.py`` their HTTP clients; ``service.py`` the commands:
submit, refresh (status), collect, wait, export and import. What is recorded, and how a killed
process re-attaches, is in ``cache/batches.py``.
"""

from .collected import Collected, batch_parts
from .service import (
    BatchView,
    CollectReport,
    ExportReport,
    SubmitReport,
    batch_api_for,
    batches,
    collect,
    download_ended,
    export,
    import_results,
    refresh,
    release,
    submit,
    wait,
    write_outputs,
)

__all__ = [
    "Collected",
    "BatchView",
    "CollectReport",
    "ExportReport",
    "SubmitReport",
    "batch_api_for",
    "batch_parts",
    "batches",
    "collect",
    "download_ended",
    "export",
    "import_results",
    "refresh",
    "release",
    "submit",
    "wait",
    "write_outputs",
]

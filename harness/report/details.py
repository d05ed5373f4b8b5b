"""Each transcript's details in the page (its texts, judgments and composite arithmetic), kept out of
memory and out of the page's main data.

While the run is read, every judgment and every transcript's texts go to a :class:`Spool`, a
temporary file: the report step holds offsets, never the text, so its memory does not grow with
the transcripts' length. The page gets the details as compressed chunks (:class:`ChunkWriter`):
``<script type="application/octet-stream">`` elements of base64 raw DEFLATE, each a JSON list of
details, which report.js inflates with the browser's ``DecompressionStream`` when a row is opened.
Chunks are written worst transcript first, and once the page's byte budget is spent the remaining
(best-scored) transcripts keep their judgments but lose their texts, with a note saying so.
"""

from __future__ import annotations

import base64
import json
import tempfile
import zlib
from pathlib import Path
from typing import IO, Any

#: A chunk is flushed at this much JSON (or CHUNK_ROWS details): opening a row inflates one chunk.
CHUNK_CHARS = 256_000
CHUNK_ROWS = 256
#: Once the budget is spent, a judge reply is cut at this many characters (the texts are left out).
SPENT_REPLY_CHARS = 1_000
CHUNK_TAG = '<script type="application/octet-stream" class="details" id="details-{}">'


def dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


class Spool:
    """An append-only temporary file of JSON values; ``put`` returns where one went, ``get`` reads it back."""

    def __init__(self, directory: Path) -> None:
        self._fh: IO[bytes] = tempfile.TemporaryFile(dir=directory, prefix=".report-spool-")  # noqa: SIM115 - closed by close()
        self._end = 0

    def put(self, value: Any) -> tuple[int, int]:
        data = dumps(value).encode("utf-8")
        self._fh.seek(self._end)
        self._fh.write(data)
        ref = (self._end, len(data))
        self._end += len(data)
        return ref

    def get(self, ref: tuple[int, int]) -> Any:
        self._fh.seek(ref[0])
        return json.loads(self._fh.read(ref[1]))

    def close(self) -> None:
        self._fh.close()

    def __enter__(self) -> Spool:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


class ChunkWriter:
    """Writes details into ``out`` as compressed chunks, and remembers where each row's went."""

    def __init__(self, out: IO[str], rows: int, budget: int) -> None:
        self.out = out
        self.budget = budget
        self.where: list[list[int] | None] = [None] * rows
        self.chunks = 0
        self.written = 0
        self._pending: list[str] = []
        self._chars = 0
        self._flushed = 0
        self._spent = False

    def spent(self, rest: int) -> bool:
        """True once the chunks written, those pending and ``rest`` (characters of JSON still to
        come however the budget goes: the judgments of the rows after this one) fill the budget.
        Pending and future JSON is counted at the compression ratio reached so far. Once spent,
        always spent: the texts kept are those of the first rows, never a scattering after them."""
        ratio = self.written / self._flushed if self._flushed else 0.6
        self._spent = self._spent or self.written + ratio * (self._chars + rest) >= self.budget
        return self._spent

    def add(self, row: int, detail: dict[str, Any]) -> None:
        self.where[row] = [self.chunks, len(self._pending)]
        text = dumps(detail)
        self._pending.append(text)
        self._chars += len(text)
        if self._chars >= CHUNK_CHARS or len(self._pending) >= CHUNK_ROWS:
            self.flush()

    def flush(self) -> None:
        if not self._pending:
            return
        packer = zlib.compressobj(6, zlib.DEFLATED, -15)  # raw DEFLATE: DecompressionStream("deflate-raw")
        body = packer.compress(("[" + ",".join(self._pending) + "]").encode("utf-8")) + packer.flush()
        encoded = base64.b64encode(body).decode("ascii")  # no "<": it cannot end the element
        self.out.write(CHUNK_TAG.format(self.chunks))
        self.out.write(encoded)
        self.out.write("</script>\n")
        self.written += len(encoded)
        self._flushed += self._chars
        self.chunks += 1
        self._pending = []
        self._chars = 0

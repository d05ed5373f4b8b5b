"""The embedded judge's worker process: SmolLM2 run by llama.cpp, many judgments per decode.

``LocalLlamaJudge`` starts this file as a script (``python llama_worker.py MODEL ...``), so it imports
nothing of the harness. The model lives here and only here: if llama.cpp segfaults, aborts or is
killed for memory, this process dies and the harness records the judgments it held as failed.

Protocol, one JSON object per line. In on stdin: ``{"id", "messages", "max_tokens", "temperature",
"seed"}``. Out on stdout: ``{"ready": true, "system_info": ...}`` once the model is loaded, then one
``{"id", "text", "prompt_tokens", "cached_tokens", "completion_tokens", "finish_reason"}`` or ``{"id", "error"}`` per
request, in the order they finish, and ``{"progress": true}`` after a decode step that finished none.
``{"fatal": ...}`` then exit 1 if the model cannot be loaded.
EOF on stdin ends the process.

Speed: requests are decoded together as parallel sequences of one llama.cpp batch (continuous
batching: a request that arrives mid-generation joins at the next step), on every core. The reply is
``{"score": N}``: the prefix ``{"score": `` is part of the prompt and each generated token is
chosen among the few tokens that keep the text a JSON number followed by ``}``, so the reply always
parses and no grammar is run over the 49,152-token vocabulary.

AMX: with weight repacking into "extra" buffer types, llama.cpp segfaults in its first batched decode
on CPUs with Intel AMX (ggml-org/llama.cpp#20824). ``use_extra_bufts = False`` avoids that path.
"""

from __future__ import annotations

import ctypes
import glob
import hashlib
import json
import os
import re
import selectors
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

PREFIX = '{"score": '
#: Text after the prefix that can still become a JSON number; and the text of a finished reply.
_GROWING = re.compile(r"-?(?:\d{1,8}(?:\.\d{0,8})?)?")
_DONE = re.compile(r"-?\d{1,8}(?:\.\d{1,8})?\}")
_NUMBER_CHARS = frozenset("0123456789.-}")
#: Requests looked at when a slot frees: the one sharing the longest prefix with a free slot's
#: cache starts first; the oldest is never passed over more than this many times.
WINDOW = 8
#: A prefix another slot holds is copied over when it saves at least this many tokens' decoding
#: (copying a 4,096-cell stream costs about what decoding a handful of tokens does).
COPY_MIN_TOKENS = 32


@dataclass
class Slot:
    """One of the context's sequences, and the tokens its KV cache holds from its last request."""

    id: int
    cached: list[int] = field(default_factory=list)
    busy: bool = False


@dataclass
class Sequence:
    id: object
    slot: Slot | None
    tokens: list[int]
    max_tokens: int
    temperature: float
    rng: np.random.Generator
    prompt_tokens: int
    pos: int = 0
    text: str = ""
    generated: int = 0
    logits_index: int = -1
    pending: list[int] = field(default_factory=list)
    #: prompt tokens read from the slot's cache instead of decoded
    cached_tokens: int = 0
    #: times a younger request started before this one (see ``Engine.take``)
    passed: int = 0


def f16_copy(ll, source: str, threads: int, folder: Path | None = None) -> str:
    """The model with its Q4_1 weights dequantised to F16, made once (about 2 s) and kept in the
    user's cache folder. llama.cpp's F16 matrix kernels read a prompt about twice as fast as its
    Q4_1 ones on an AVX2 CPU (bench/local_judge.py); the judgments are the same model's.

    The copy is named by the source's content hash, so reinstalling the model package (a new file
    with new times) reuses it, and copies of other versions of the same model are removed when a
    new one is made: the folder holds one 260 MB copy per model, not one per install."""
    with open(source, "rb") as handle:
        digest = hashlib.file_digest(handle, "sha256").hexdigest()[:16]
    stem = Path(source).stem
    name = f"{stem}.{digest}.F16.gguf"
    if folder is None:
        folder = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "harness"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        folder = Path(tempfile.mkdtemp(prefix="harness-model-"))
    target = folder / name
    if target.is_file():
        return str(target)
    params = ll.llama_model_quantize_default_params()
    params.ftype = ll.LLAMA_FTYPE_MOSTLY_F16
    params.allow_requantize = True
    params.nthread = threads
    partial = folder / f".{name}.{os.getpid()}.partial"
    if ll.llama_model_quantize(source.encode(), str(partial).encode(), ctypes.byref(params)) != 0:
        partial.unlink(missing_ok=True)
        raise RuntimeError(f"llama.cpp could not convert {source} to F16")
    os.replace(partial, target)  # atomic: a concurrent worker sees the whole file or none
    for stale in folder.glob(f"{glob.escape(stem)}.*.F16.gguf"):
        if stale != target:
            stale.unlink(missing_ok=True)  # a worker still using it keeps its mapping until it exits
    return str(target)


class Engine:
    """A llama.cpp model and context with ``parallel`` sequence slots."""

    def __init__(self, model_path: str, n_ctx_per_request: int, parallel: int, threads: int) -> None:
        import llama_cpp as ll

        self.ll = ll
        self._silence = ll.llama_log_callback(lambda level, text, data: None)
        ll.llama_log_set(self._silence, ctypes.c_void_p())
        ll.llama_backend_init()
        mparams = ll.llama_model_default_params()
        mparams.use_extra_bufts = False  # the AMX repack path segfaults (see the module docstring)
        self.model = ll.llama_model_load_from_file(f16_copy(ll, model_path, threads).encode(), mparams)
        if not self.model:
            raise RuntimeError(f"llama.cpp could not load {model_path}")
        n_ctx = n_ctx_per_request * parallel
        cparams = ll.llama_context_default_params()
        cparams.n_ctx = n_ctx
        cparams.n_batch = n_ctx
        cparams.n_ubatch = 512
        cparams.n_seq_max = parallel
        # One KV stream per sequence: each token attends to its own request's cells only. A
        # unified cache makes every token attend across all of them, which doubles the work at 8.
        cparams.kv_unified = False
        cparams.n_threads = cparams.n_threads_batch = threads
        self.ctx = ll.llama_init_from_model(self.model, cparams)
        if not self.ctx:
            raise RuntimeError("llama.cpp could not create a context")
        self.vocab = ll.llama_model_get_vocab(self.model)
        self.n_vocab = ll.llama_vocab_n_tokens(self.vocab)
        self.memory = ll.llama_get_memory(self.ctx)
        self.n_ctx_per_request = n_ctx_per_request
        self.template = ll.llama_model_chat_template(self.model, None)
        self.batch = ll.llama_batch_init(n_ctx, 0, 1)
        self.slots = [Slot(i) for i in range(parallel)]
        self.active: list[Sequence] = []
        #: prompt tokens read from a slot's cache instead of decoded (the shared system prompt and rubric text)
        self.reused_tokens = 0
        #: slot caches copied from another slot that held a longer shared prefix
        self.copies = 0
        self._candidates, self._pieces = self._number_tokens()

    def _piece(self, token: int) -> str:
        buf = ctypes.create_string_buffer(64)
        n = self.ll.llama_token_to_piece(self.vocab, token, buf, len(buf), 0, False)
        return buf.raw[: max(n, 0)].decode("utf-8", errors="replace")

    def _number_tokens(self) -> tuple[np.ndarray, list[str]]:
        """The tokens made only of digits, '.', '-' and '}': the only ones a reply may contain."""
        ids, pieces = [], []
        for token in range(self.n_vocab):
            piece = self._piece(token)
            if piece and set(piece) <= _NUMBER_CHARS:
                ids.append(token)
                pieces.append(piece)
        return np.array(ids, dtype=np.int64), pieces

    def prompt_text(self, messages: list[dict[str, str]]) -> str:
        ll = self.ll
        chat = (ll.llama_chat_message * len(messages))()
        keep = []
        for i, message in enumerate(messages):
            role, content = message["role"].encode(), message["content"].encode()
            keep += [role, content]
            chat[i].role, chat[i].content = role, content
        size = sum(len(x) for x in keep) * 2 + 256
        buf = ctypes.create_string_buffer(size)
        n = ll.llama_chat_apply_template(self.template, chat, len(messages), True, buf, size)
        if n > size:
            buf = ctypes.create_string_buffer(n)
            n = ll.llama_chat_apply_template(self.template, chat, len(messages), True, buf, n)
        if n < 0:
            raise ValueError("the model's chat template cannot format these messages")
        return buf.raw[:n].decode("utf-8") + PREFIX

    def tokenize(self, text: str) -> list[int]:
        data = text.encode("utf-8")
        out = (self.ll.llama_token * (len(data) + 8))()
        n = self.ll.llama_tokenize(self.vocab, data, len(data), out, len(out), True, True)
        if n < 0:
            raise ValueError("prompt could not be tokenized")
        return list(out[:n])

    def admit(self, request: dict) -> Sequence:
        """Tokenise a request and give it a slot. Raises ValueError when it can never fit."""
        tokens = self.tokenize(self.prompt_text(request["messages"]))
        max_tokens = max(1, int(request.get("max_tokens") or 16))
        if len(tokens) + max_tokens > self.n_ctx_per_request:
            raise ValueError(f"Requested tokens ({len(tokens) + max_tokens}) exceed context window of {self.n_ctx_per_request}")
        seed = request.get("seed")
        return Sequence(
            id=request["id"],
            slot=None,
            tokens=tokens,
            max_tokens=max_tokens,
            temperature=float(request.get("temperature") or 0.0),
            rng=np.random.default_rng(0 if seed is None else int(seed)),
            prompt_tokens=len(tokens),
            pending=tokens,
        )

    def has_room(self) -> bool:
        return any(not slot.busy for slot in self.slots)

    def take(self, waiting: list[Sequence]) -> None:
        """Start waiting requests while a slot is free. Of the oldest ``WINDOW``, the one whose
        prompt shares the longest prefix with a free slot's cache goes first (the oldest on a tie),
        so a slot keeps serving the rubric whose text it holds; a request passed over ``WINDOW``
        times goes next, whatever it shares."""
        while waiting and self.has_room():
            window = waiting[:WINDOW]
            chosen = 0
            if window[0].passed < WINDOW:
                free = [slot for slot in self.slots if not slot.busy]
                shared = [max(_common_prefix(slot.cached, seq.tokens) for slot in free) for seq in window]
                chosen = shared.index(max(shared))
            for seq in window[:chosen]:
                seq.passed += 1
            self.start(waiting.pop(chosen))

    def start(self, seq: Sequence) -> None:
        """Put the request in the free slot whose cache shares the longest prefix with its prompt,
        keep that prefix and decode only the rest (as llama.cpp's server reuses a slot's prompt).
        When another slot, busy or not, holds a longer shared prefix (the same rubric's text),
        its whole cache is copied into the chosen slot first: a memory copy instead of decoding
        a few hundred tokens again."""
        shares = [_common_prefix(s.cached, seq.tokens) for s in self.slots]  # slot ids are their indexes
        slot = max((s for s in self.slots if not s.busy), key=lambda s: shares[s.id])
        donor = max(self.slots, key=lambda s: shares[s.id])
        keep, shared = shares[slot.id], shares[donor.id]
        if donor is not slot and shared >= keep + COPY_MIN_TOKENS:
            # Across KV streams llama.cpp copies whole buffers only; the copy runs at the next decode.
            self.ll.llama_memory_seq_cp(self.memory, donor.id, slot.id, -1, -1)
            slot.cached = list(donor.cached)
            keep = shared
            self.copies += 1
        keep = min(keep, len(seq.tokens) - 1)  # the last one gives the logits
        self.ll.llama_memory_seq_rm(self.memory, slot.id, keep, -1)
        slot.cached = seq.tokens[:keep]
        slot.busy = True
        self.reused_tokens += keep
        seq.cached_tokens = keep
        seq.slot, seq.pos, seq.pending = slot, keep, seq.tokens[keep:]
        self.active.append(seq)

    def step(self) -> list[dict]:
        """One decode over every active sequence's pending tokens; returns the replies that finished."""
        ll, batch = self.ll, self.batch
        n = 0
        for seq in self.active:
            assert seq.slot is not None
            for j, token in enumerate(seq.pending):
                batch.token[n] = token
                batch.pos[n] = seq.pos + j
                batch.n_seq_id[n] = 1
                batch.seq_id[n][0] = seq.slot.id
                batch.logits[n] = j == len(seq.pending) - 1
                n += 1
            seq.pos += len(seq.pending)
            seq.slot.cached += seq.pending
            seq.logits_index = n - 1
            seq.pending = []
        batch.n_tokens = n
        status = ll.llama_decode(self.ctx, batch)
        if status != 0:
            raise RuntimeError(f"llama_decode returned {status}")
        finished, still = [], []
        for seq in self.active:
            reply = self._advance(seq)
            if reply is None:
                still.append(seq)
            else:
                finished.append(reply)
                assert seq.slot is not None
                seq.slot.busy = False  # its cache stays, for the next prompt that starts the same way
        self.active = still
        return finished

    def _advance(self, seq: Sequence) -> dict | None:
        logits = np.ctypeslib.as_array(self.ll.llama_get_logits_ith(self.ctx, seq.logits_index), shape=(self.n_vocab,))
        token = self._choose(seq, logits[self._candidates])
        seq.generated += 1
        finish = None
        if token is None:
            finish = "stop"  # no token keeps the reply valid: end it here
        else:
            seq.text += self._pieces[token]
            if _DONE.fullmatch(seq.text):
                finish = "stop"
            elif seq.generated >= seq.max_tokens:
                finish = "length"
            else:
                seq.pending = [int(self._candidates[token])]
        if finish is None:
            return None
        return {
            "id": seq.id,
            "text": PREFIX + seq.text,
            "prompt_tokens": seq.prompt_tokens,
            "cached_tokens": seq.cached_tokens,
            "completion_tokens": seq.generated,
            "finish_reason": finish,
        }

    def _choose(self, seq: Sequence, logits: np.ndarray) -> int | None:
        """Index into the candidates of the next token: greedy at temperature 0, else sampled."""
        viable = [i for i, piece in enumerate(self._pieces) if _viable(seq.text + piece)]
        if not viable:
            return None
        scores = logits[viable].astype(np.float64)
        if seq.temperature <= 0:
            return viable[int(np.argmax(scores))]
        scores = (scores - scores.max()) / seq.temperature
        p = np.exp(scores)
        return viable[int(seq.rng.choice(len(viable), p=p / p.sum()))]


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def _viable(text: str) -> bool:
    return bool(_GROWING.fullmatch(text) or _DONE.fullmatch(text))


class Lines:
    """Whole lines from a file descriptor, without blocking when asked not to."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = b""
        self.eof = False
        self.selector = selectors.DefaultSelector()
        self.selector.register(fd, selectors.EVENT_READ)

    def read(self, block: bool) -> list[bytes]:
        while not self.eof:
            if not self.selector.select(None if block and b"\n" not in self.buffer else 0):
                break
            chunk = os.read(self.fd, 1 << 20)
            if not chunk:
                self.eof = True
            self.buffer += chunk
            block = False
        *lines, self.buffer = self.buffer.split(b"\n")
        if self.eof and self.buffer:
            lines.append(self.buffer)
            self.buffer = b""
        return [line for line in lines if line.strip()]


def serve(engine: Engine, lines: Lines, out) -> None:
    def send(message: dict) -> None:
        out.write(json.dumps(message) + "\n")
        out.flush()

    waiting: list[Sequence] = []
    while True:
        for raw in lines.read(block=not engine.active and not waiting):
            request = json.loads(raw)
            try:
                waiting.append(engine.admit(request))
            except ValueError as exc:
                send({"id": request.get("id"), "error": str(exc)})
        engine.take(waiting)
        if engine.active:
            replies = engine.step()
            for reply in replies:
                send(reply)
            if not replies:
                send({"progress": True})  # a decode step ended: the parent's watchdog sees progress
        elif lines.eof and not waiting:
            return


def main(argv: list[str]) -> int:
    model_path, per_request, parallel, threads = argv[0], *map(int, argv[1:4])
    # The protocol gets its own copy of stdout; fd 1 then points at stderr, so nothing that native
    # code prints can corrupt it.
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    try:
        engine = Engine(model_path, per_request, parallel, threads)
    except Exception as exc:  # noqa: BLE001 - any load failure is reported to the parent, one line
        out.write(json.dumps({"fatal": f"{type(exc).__name__}: {exc}"}) + "\n")
        out.flush()
        return 1
    out.write(json.dumps({"ready": True, "system_info": engine.ll.llama_print_system_info().decode(errors="replace")}) + "\n")
    out.flush()
    serve(engine, Lines(sys.stdin.fileno()), out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

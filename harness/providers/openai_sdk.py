"""OpenAI chat completions through the official ``openai`` SDK (``provider = "openai-sdk"``): the
same endpoint, key and requests as ``openai``, on the SDK's own HTTP stack."""

from __future__ import annotations

from dataclasses import replace

from .openai import PROFILE as OPENAI

PROFILE = replace(OPENAI, name="openai-sdk", judge="harness.judges.openai_sdk:OpenAISDKJudge")

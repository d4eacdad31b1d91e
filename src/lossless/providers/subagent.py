"""Expansion sub-agents driven by a model: a tool-calling loop over the official openai / anthropic SDKs.

Invariants:

* The model gets exactly :data:`lossless.tools.SUBAGENT_TOOLS` (``lcm_grep``,
  ``lcm_describe``, ``lcm_expand``), never ``lcm_expand_query``; every call it
  makes runs through the :class:`~lossless.subagent.SubagentTools` it is handed
  (in ``expand_query``: :class:`~lossless.retrieval.expansion.ExpansionTools`),
  i.e. under the grant, so it reads nothing the grant does not cover, and a
  revoked or expired grant ends the loop at the next call.
* Bounded: at most ``max_turns`` model calls; each tool result sent back is
  cut to ``max_result_chars``; the answer is asked for within ``max_tokens``.
* SDK failures become :class:`~lossless.errors.ProviderError` (no key in any
  message); malformed tool arguments are answered to the model as an error
  result, never raised.
* Like the summarizers, the SDKs are configured explicitly (key, base URL, no
  retries) and never read the environment.
"""

from __future__ import annotations

import json
import re
from typing import Any

from lossless.config import Config, resolve_api_key, resolve_base_url
from lossless.errors import ConfigError, ProviderError
from lossless.providers.base import NO_KEY, body_detail, connection_error, status_error, timeout_error
from lossless.subagent import ExpansionAnswer, ExpansionTask, SubagentTools
from lossless.tools import SUBAGENT_TOOLS

__all__ = ["SYSTEM_PROMPT", "LLMExpansionRunner", "llm_expansion_runner_for"]

SYSTEM_PROMPT = (
    "You answer one question from an agent's stored conversation history, which was compacted into summaries. "
    "Use lcm_grep to find things, lcm_describe to inspect a summary or file, and lcm_expand (with "
    "include_messages=true) to read the original messages under a summary. Read only what you need. Then answer "
    "concisely and cite the ids you relied on, as [msg#123] or [sum_…]. If the history does not say, say so."
)
_CITATION = re.compile(r"\b(sum_[0-9A-Za-z]+|msg#\d+)")


def _task_text(task: ExpansionTask) -> str:
    lines = [f"Question: {task.prompt}"]
    if task.summary_ids:
        lines.append(f"Start from these summaries: {', '.join(task.summary_ids)}")
    if task.query:
        lines.append(f"The asking agent searched for: {task.query}")
    lines.append(f"Answer in at most {task.max_tokens} tokens.")
    return "\n".join(lines)


def _cited(text: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(_CITATION.findall(text)))


class LLMExpansionRunner:
    """An :class:`~lossless.retrieval.expansion.ExpansionRunner` backed by an OpenAI- or Anthropic-style API."""

    def __init__(
        self,
        api: str,
        model: str,
        *,
        api_key: str | None,
        base_url: str | None = None,
        timeout_s: float = 60.0,
        max_turns: int = 8,
        max_result_chars: int = 12_000,
        key_source: str = "the caller",
    ) -> None:
        if api not in ("openai", "anthropic"):
            raise ConfigError(f"expansion_provider must be openai or anthropic for a model runner, got {api!r}")
        self.api = api
        self.name = f"{api}:{model}"
        self._model = model
        self._api_key = api_key
        self._base_url = base_url
        self._timeout_s = timeout_s
        self._max_turns = max_turns
        self._max_result_chars = max_result_chars
        self._key_source = key_source

    async def run(self, task: ExpansionTask, tools: SubagentTools) -> ExpansionAnswer:
        if self.api == "openai":
            return await self._run_openai(task, tools)
        return await self._run_anthropic(task, tools)

    async def _tool_result(self, tools: SubagentTools, name: str, raw: object) -> str:
        if isinstance(raw, str):
            try:
                raw = json.loads(raw or "{}")
            except ValueError:
                return "error: the arguments are not valid JSON; send a JSON object"
        outcome = await tools.call(name, raw if isinstance(raw, dict) else {"": raw})
        text = outcome.text
        if len(text) > self._max_result_chars:
            text = text[: self._max_result_chars] + "\n… (cut: narrow the call, e.g. a lower token_cap or limit)"
        return text

    # -- OpenAI chat completions

    async def _run_openai(self, task: ExpansionTask, tools: SubagentTools) -> ExpansionAnswer:
        import openai
        from openai import AsyncOpenAI

        definitions = [spec.openai() for spec in SUBAGENT_TOOLS]
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": _task_text(task)},
        ]
        client = AsyncOpenAI(
            api_key=self._api_key or NO_KEY,
            base_url=self._base_url or "https://api.openai.com/v1",
            max_retries=0,
            timeout=self._timeout_s,
        )
        client.organization = None
        client.project = None
        async with client:
            for turn in range(self._max_turns):
                last = turn == self._max_turns - 1
                try:
                    params: dict[str, Any] = {
                        "model": self._model,
                        "messages": messages,
                        "tools": definitions,
                        "tool_choice": "none" if last else "auto",
                        "max_tokens": task.max_tokens,
                    }
                    response = await client.chat.completions.create(**params)
                except openai.APIStatusError as exc:
                    raise self._status(exc.status_code, body_detail(exc.body, exc.message)) from exc
                except openai.APITimeoutError as exc:
                    raise timeout_error(self.api, self._endpoint, self._timeout_s) from exc
                except openai.APIConnectionError as exc:
                    raise connection_error(self.api, self._endpoint, str(exc)) from exc
                message = response.choices[0].message if response.choices else None
                calls = list(getattr(message, "tool_calls", None) or [])
                content = getattr(message, "content", None) or ""
                if not calls:
                    return ExpansionAnswer(content, _cited(content))
                messages.append(
                    {
                        "role": "assistant",
                        "content": content or None,
                        "tool_calls": [
                            {
                                "id": c.id,
                                "type": "function",
                                "function": {"name": c.function.name, "arguments": c.function.arguments},
                            }
                            for c in calls
                        ],
                    }
                )
                for call in calls:
                    result = await self._tool_result(tools, call.function.name, call.function.arguments)
                    messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
        return ExpansionAnswer(f"The sub-agent made {self._max_turns} model calls without answering.")

    # -- Anthropic messages

    async def _run_anthropic(self, task: ExpansionTask, tools: SubagentTools) -> ExpansionAnswer:
        import anthropic
        from anthropic import AsyncAnthropic

        definitions = [spec.anthropic() for spec in SUBAGENT_TOOLS]
        messages: list[dict[str, Any]] = [{"role": "user", "content": _task_text(task)}]
        client = AsyncAnthropic(
            api_key=self._api_key or NO_KEY,
            base_url=self._base_url or "https://api.anthropic.com",
            max_retries=0,
            timeout=self._timeout_s,
        )
        async with client:
            for turn in range(self._max_turns):
                last = turn == self._max_turns - 1
                try:
                    params: dict[str, Any] = {
                        "model": self._model,
                        "system": SYSTEM_PROMPT,
                        "messages": messages,
                        "tools": definitions,
                        "tool_choice": {"type": "none"} if last else {"type": "auto"},
                        "max_tokens": task.max_tokens,
                    }
                    response = await client.messages.create(**params)
                except anthropic.APIStatusError as exc:
                    raise self._status(exc.status_code, body_detail(exc.body, exc.message)) from exc
                except anthropic.APITimeoutError as exc:
                    raise timeout_error(self.api, self._endpoint, self._timeout_s) from exc
                except anthropic.APIConnectionError as exc:
                    raise connection_error(self.api, self._endpoint, str(exc)) from exc
                blocks = list(response.content)
                uses = [b for b in blocks if getattr(b, "type", None) == "tool_use"]
                text = "\n".join(getattr(b, "text", "") for b in blocks if getattr(b, "type", None) == "text")
                if not uses:
                    return ExpansionAnswer(text, _cited(text))
                messages.append({"role": "assistant", "content": [b.model_dump() for b in blocks]})
                results = [
                    {
                        "type": "tool_result",
                        "tool_use_id": use.id,
                        "content": await self._tool_result(tools, use.name, use.input),
                    }
                    for use in uses
                ]
                messages.append({"role": "user", "content": results})
        return ExpansionAnswer(f"The sub-agent made {self._max_turns} model calls without answering.")

    @property
    def _endpoint(self) -> str:
        return self._base_url or self.api

    def _status(self, status: int, detail: str) -> ProviderError:
        return status_error(
            self.api,
            status,
            detail,
            model=self._model,
            endpoint=self._endpoint,
            key_source=self._key_source,
            secrets=[self._api_key],
        )


def llm_expansion_runner_for(config: Config) -> LLMExpansionRunner | None:
    """The model-backed sub-agent runner ``expansion_provider`` names; None for the offline one (the default)."""
    provider = (config.expansion_provider or "").strip().lower()
    if provider in ("", "offline"):
        return None
    if provider not in ("openai", "anthropic"):
        raise ConfigError(
            f"expansion_provider = {config.expansion_provider!r}: use offline, openai or anthropic",
            setting="expansion_provider",
        )
    model = config.expansion_model or config.summary_model
    if not model:
        raise ConfigError(
            f"expansion_provider = {provider!r} needs a model: set expansion_model", setting="expansion_model"
        )
    credential = resolve_api_key(config, provider)
    key = None if credential is None else credential.value
    return LLMExpansionRunner(
        provider,
        model,
        api_key=key,
        base_url=resolve_base_url(config, provider),
        timeout_s=config.delegation_timeout_ms / 1000,
        key_source="none" if credential is None else credential.source,
    )

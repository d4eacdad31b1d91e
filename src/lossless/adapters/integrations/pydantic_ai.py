"""The Pydantic AI drop-in: a capability that stores the run's messages and sends the assembled context.

Use::

    history = LosslessHistory(engine, "user-42", token_budget=16_000)
    agent = Agent(model, capabilities=[history], toolsets=[lossless_toolset(engine, "user-42")])
    await agent.run("hello")                    # the engine is the history: no message_history needed

Invariants:

* Before each model request, every message of the run the engine has not stored yet is stored
  (through :meth:`ContextEngine.after_turn`, so compaction runs when a trigger fires); after the
  run, its last answer too.  A message's ``event_key`` is its run id and its place among that run's
  messages, so passing ``message_history=result.all_messages()`` back in never stores anything twice.
* The request the model gets is the context the engine assembles within ``token_budget``
  (summaries of old history, then the raw tail, the recall guidance first) — the request only:
  the run's own message history (``result.all_messages()``) stays what Pydantic AI built.
* Tool calls keep their ids and arguments, tool returns their call id, thinking is stored as
  reasoning; nothing of a message is dropped on the way in.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lossless.adapters.integrations.bridge import ChatDict, bound_tools, check_budget, check_session, context_chat
from lossless.engine import ContextEngine
from lossless.errors import MissingDependencyError, StoreError
from lossless.records import Message, Part, ReasoningPart, TextPart, ToolPart

try:
    from pydantic_ai import messages as pai
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.tools import Tool
    from pydantic_ai.toolsets import FunctionToolset
except ImportError as exc:  # pragma: no cover - exercised where the extra is missing
    raise MissingDependencyError("the Pydantic AI drop-in", "pydantic-ai", exc.name or "pydantic_ai") from exc

if TYPE_CHECKING:
    from pydantic_ai.models import ModelRequestContext
    from pydantic_ai.run import AgentRunResult
    from pydantic_ai.tools import RunContext

__all__ = ["LosslessHistory", "from_chat", "lossless_toolset", "to_messages"]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence) and not isinstance(content, bytes):
        return "\n\n".join(_text(c) for c in content)
    try:
        return json.dumps(content, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(content)


def to_messages(message: pai.ModelMessage) -> list[Message]:
    """Our messages for one Pydantic AI message (a request may hold a system prompt, user text and tool returns)."""
    if isinstance(message, pai.ModelResponse):
        parts: list[Part] = []
        for part in message.parts:
            if isinstance(part, pai.TextPart):
                parts.append(TextPart(part.content))
            elif isinstance(part, pai.ToolCallPart):
                parts.append(ToolPart(call_id=part.tool_call_id, name=part.tool_name, input=part.args_as_dict()))
            elif isinstance(part, pai.ThinkingPart):
                parts.append(ReasoningPart(part.content, signature=part.signature))
            else:  # native tool calls, files: kept as their JSON
                parts.append(TextPart(_text(_plain(part)), synthetic=True))
        return [Message.from_parts("assistant", parts)]
    out: list[Message] = []
    request_parts: Sequence[Any] = message.parts
    for part in request_parts:
        if isinstance(part, pai.SystemPromptPart):
            out.append(Message("system", part.content))
        elif isinstance(part, pai.UserPromptPart):
            out.append(Message("user", _text(part.content)))
        elif isinstance(part, pai.ToolReturnPart):
            tool = ToolPart(
                call_id=part.tool_call_id, name=part.tool_name, output=_text(part.content), status="completed"
            )
            out.append(Message.from_parts("tool", [tool]))
        elif isinstance(part, pai.RetryPromptPart):
            text = part.model_response()
            if part.tool_name and part.tool_call_id:
                failed = ToolPart(call_id=part.tool_call_id, name=part.tool_name, error=text, status="error")
                out.append(Message.from_parts("tool", [failed]))
            else:
                out.append(Message("user", text))
        else:
            out.append(Message("user", _text(_plain(part)), parts=(TextPart(_text(_plain(part)), synthetic=True),)))
    return out


def _plain(part: object) -> Any:
    from dataclasses import asdict, is_dataclass

    return asdict(part) if is_dataclass(part) and not isinstance(part, type) else str(part)


def from_chat(chat: Sequence[ChatDict]) -> list[pai.ModelMessage]:
    """OpenAI chat messages (the assembled context) as Pydantic AI messages."""
    names: dict[str, str] = {}
    out: list[pai.ModelMessage] = []
    for message in chat:
        role = message.get("role")
        content = message.get("content")
        if role == "assistant":
            parts: list[Any] = [pai.TextPart(content)] if content else []
            for call in message.get("tool_calls") or ():
                function = call.get("function") or {}
                names[call.get("id")] = function.get("name") or "tool"
                name = str(function.get("name") or "tool")
                parts.append(pai.ToolCallPart(name, function.get("arguments"), tool_call_id=call["id"]))
            if parts:
                out.append(pai.ModelResponse(parts=parts))
        elif role == "tool":
            call_id = message.get("tool_call_id") or ""
            part = pai.ToolReturnPart(names.get(call_id, "tool"), content or "", tool_call_id=call_id)
            out.append(pai.ModelRequest(parts=[part]))
        elif role == "system":
            out.append(pai.ModelRequest(parts=[pai.SystemPromptPart(_text(content))]))
        else:
            text = content if isinstance(content, str) else _text([b.get("text", "") for b in content or ()])
            out.append(pai.ModelRequest(parts=[pai.UserPromptPart(text)]))
    return out


def _keys(messages: Sequence[pai.ModelMessage], run_id: str | None) -> list[str]:
    """A stable key per message: its run and its place among that run's messages."""
    seen: dict[str, int] = defaultdict(int)
    keys = []
    for message in messages:
        run = message.run_id or run_id or "run"
        keys.append(f"pai:{run}:{seen[run]}")
        seen[run] += 1
    return keys


@dataclass
class LosslessHistory(AbstractCapability[Any]):
    """A Pydantic AI capability: the engine stores the run's messages and chooses what the model is sent."""

    engine: ContextEngine = field(repr=False)
    session_id: str
    token_budget: int = 16_000
    _stored: set[str] = field(default_factory=set, repr=False)

    def __post_init__(self) -> None:
        check_session(self.session_id)
        check_budget(self.token_budget)

    async def _store(self, messages: Sequence[pai.ModelMessage], run_id: str | None) -> None:
        batch: list[Message] = []
        keys: list[str] = []
        for key, message in zip(_keys(messages, run_id), messages, strict=True):
            if key in self._stored:
                continue
            for i, ours in enumerate(to_messages(message)):
                batch.append(Message(ours.role, ours.content, ours.parts, event_key=f"{key}:{i}"))
            keys.append(key)
        if not batch:
            return
        done = await self.engine.after_turn(self.session_id, batch, token_budget=self.token_budget)
        if done.error and done.ingest.conversation_id is None:
            raise StoreError(f"the run's messages were not stored: {done.error}")
        self._stored.update(keys)

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        await self._store(request_context.messages, ctx.run_id)
        chat = await context_chat(self.engine, self.session_id, token_budget=self.token_budget)
        request_context.messages = from_chat(chat)
        return request_context

    async def after_run(self, ctx: RunContext[Any], *, result: AgentRunResult[Any]) -> AgentRunResult[Any]:
        await self._store(result.all_messages(), ctx.run_id)
        return result


def lossless_toolset(engine: ContextEngine, session_id: str, *, memory: bool = False) -> FunctionToolset[Any]:
    """The recall tools (and with ``memory`` the memory tools) of ``session_id`` as a Pydantic AI toolset."""
    tools = []
    for bound in bound_tools(engine, session_id, memory=memory):

        async def run(_bound: Any = bound, **arguments: Any) -> str:
            return str(await _bound(arguments))

        tools.append(
            Tool.from_schema(run, name=bound.name, description=bound.description, json_schema=bound.parameters)
        )
    return FunctionToolset(tools)

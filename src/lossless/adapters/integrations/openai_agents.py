"""The OpenAI Agents SDK drop-in: a ``Session`` backed by the engine, and the recall tools as function tools.

Use::

    session = LosslessSession(engine, "user-42", token_budget=16_000)
    result = await Runner.run(agent, "hello", session=session)

Invariants:

* ``add_items`` stores every item the SDK hands over, once, through
  :meth:`ContextEngine.after_turn` (so compaction runs when a trigger fires): messages, function
  calls with their arguments, function results, reasoning, anything else kept as its JSON.  A turn
  the engine could not store raises :class:`~lossless.errors.StoreError`; nothing is dropped silently.
* ``get_items()`` is the session as the model should see it: the context the engine assembles
  within ``token_budget`` (summaries of old history, then the raw tail), as Responses input items,
  the recall guidance first.  ``get_items(limit=N)`` is the newest N of those.
* ``pop_item`` and ``clear_session`` never delete: the session goes on in a new conversation
  (``<session_id>~1``, ``~2``, …) linked to the old one, which stays stored and searchable.
  ``pop_item`` carries the context over without its newest raw message (and returns that item);
  ``clear_session`` starts empty.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from lossless.adapters.integrations.bridge import (
    ChatDict,
    bound_tools,
    chat_message,
    check_budget,
    check_session,
    context_chat,
)
from lossless.engine import ContextEngine
from lossless.errors import InputError, MissingDependencyError, NotFoundError, StoreError
from lossless.records import Message, MessageRecord, Role
from lossless.transcripts.blocks import block_to_parts, content_to_parts

if TYPE_CHECKING:
    from agents import FunctionTool

__all__ = ["LosslessSession", "chat_to_items", "item_to_message", "lossless_tools"]

_FAKE_ID = "__fake_id__"  # the SDK's placeholder id for items a chat-completions model produced


def _require_sdk() -> None:
    try:
        import agents  # noqa: F401
    except ImportError as exc:
        raise MissingDependencyError("the OpenAI Agents SDK drop-in", "openai-agents", exc.name or "agents") from exc


def item_to_message(item: Mapping[str, Any]) -> Message:
    """Our message for one Responses input item (the SDK's ``TResponseInputItem``)."""
    if not isinstance(item, Mapping):
        raise InputError(f"a session item must be a JSON object, got {type(item).__name__}")
    data = json.loads(json.dumps(item, default=str))  # plain JSON values, whatever the SDK built
    kind = data.get("type")
    role = data.get("role")
    call_id = data.get("call_id")
    item_id = data.get("id") if isinstance(data.get("id"), str) and data.get("id") != _FAKE_ID else None
    meta = {"agents_item_type": kind or "message", **({"agents_item_id": item_id} if item_id else {})}
    if kind in (None, "message") and role in ("user", "assistant", "system", "developer"):
        message = chat_message({"role": role, "content": data.get("content")})
        return Message(
            message.role,
            message.content,
            tuple(content_to_parts(data.get("content"))) or message.parts,
            event_key=f"agents:{item_id}" if item_id else None,
            metadata={**(message.metadata or {}), **meta},
        )
    parts = block_to_parts(data)
    role_of: Role = (
        "tool" if kind in ("function_call_output", "custom_tool_call_output", "computer_call_output") else "assistant"
    )
    key: str | None
    if kind == "function_call" and isinstance(call_id, str):
        key = f"agents:call:{call_id}"
    elif role_of == "tool" and isinstance(call_id, str):
        key = f"agents:result:{call_id}"
    else:
        key = f"agents:{item_id}" if item_id else None
    return Message.from_parts(role_of, parts, event_key=key, metadata=meta)


def chat_to_items(chat: Sequence[ChatDict]) -> list[dict[str, Any]]:
    """OpenAI chat messages as Responses input items (what the SDK prepends to a run's input)."""
    items: list[dict[str, Any]] = []
    for message in chat:
        role = message.get("role")
        content = message.get("content")
        if role == "tool":
            items.append(
                {"type": "function_call_output", "call_id": message.get("tool_call_id"), "output": content or ""}
            )
            continue
        if role == "user" and isinstance(content, list):
            blocks = [
                {"type": "input_text", "text": b.get("text", "")}
                if b.get("type") == "text"
                else {"type": "input_image", "image_url": b["image_url"]["url"], "detail": "auto"}
                for b in content
                if b.get("type") in ("text", "image_url")
            ]
            items.append({"role": "user", "content": blocks})
        elif content:
            items.append({"role": role, "content": content})
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            items.append(
                {
                    "type": "function_call",
                    "call_id": call.get("id"),
                    "name": function.get("name"),
                    "arguments": function.get("arguments") or "{}",
                }
            )
    return items


class LosslessSession:
    """An Agents SDK session whose history lives in the engine: stored verbatim, sent within a budget.

    ``session_id`` is the SDK's session id and the engine's session id (later generations, after
    :meth:`pop_item` or :meth:`clear_session`, add ``~1``, ``~2``…).  ``token_budget`` bounds what
    :meth:`get_items` returns (the model's context minus what the agent's instructions and tools
    take).
    """

    session_settings: Any = None

    def __init__(self, engine: ContextEngine, session_id: str, *, token_budget: int = 16_000) -> None:
        _require_sdk()
        self.session_id = check_session(session_id)
        token_budget = check_budget(token_budget)
        self.engine = engine
        self.token_budget = token_budget
        self._generation: int | None = None

    # -- which conversation the session is in now

    def _name(self, generation: int) -> str:
        return self.session_id if generation == 0 else f"{self.session_id}~{generation}"

    async def _exists(self, name: str) -> bool:
        try:
            await self.engine.conversation(name)
        except NotFoundError:
            return False
        return True

    async def current_session_id(self) -> str:
        """The engine session id the SDK session writes to now."""
        if self._generation is None:
            generation = 0
            while await self._exists(self._name(generation + 1)):
                generation += 1
            self._generation = generation
        return self._name(self._generation)

    # -- the Session protocol

    async def get_items(self, limit: int | None = None) -> list[Any]:
        name = await self.current_session_id()
        if not await self._exists(name):
            return []
        items = chat_to_items(await context_chat(self.engine, name, token_budget=self.token_budget))
        return items if limit is None else items[-limit:] if limit > 0 else []

    async def add_items(self, items: list[Any]) -> None:
        if not items:
            return
        messages = [item_to_message(item) for item in items]
        name = await self.current_session_id()
        done = await self.engine.after_turn(name, messages, token_budget=self.token_budget)
        if done.error and done.ingest.conversation_id is None:
            raise StoreError(f"the session's items were not stored: {done.error}")

    async def pop_item(self) -> Any | None:
        name = await self.current_session_id()
        if not await self._exists(name):
            return None
        assert self._generation is not None
        dropped = await self.engine.restart_session(
            name, self._name(self._generation + 1), carry_context=True, drop_newest=1
        )
        self._generation += 1
        return _record_item(dropped[-1]) if dropped else None

    async def clear_session(self) -> None:
        name = await self.current_session_id()
        if not await self._exists(name):
            return
        assert self._generation is not None
        await self.engine.restart_session(name, self._name(self._generation + 1))
        self._generation += 1


def _record_item(record: MessageRecord) -> Any:
    """A stored message back as the Responses item it was (as near as the parts allow)."""
    from lossless.formats import render_openai

    items = chat_to_items(render_openai(record))
    return items[-1] if items else None


def lossless_tools(engine: ContextEngine, session_id: str, *, memory: bool = False) -> list[FunctionTool]:
    """The recall tools (``lcm_grep``, ``lcm_describe``, ``lcm_expand_query``; ``memory`` adds the
    memory tools) as Agents SDK function tools, searching ``session_id``'s history."""
    _require_sdk()
    from agents import FunctionTool

    def function_tool(bound: Any) -> FunctionTool:
        async def invoke(context: Any, arguments: str) -> str:
            return str(await bound(arguments))

        return FunctionTool(
            name=bound.name,
            description=bound.description,
            params_json_schema=bound.parameters,
            on_invoke_tool=invoke,
            strict_json_schema=False,
        )

    return [function_tool(bound) for bound in bound_tools(engine, session_id, memory=memory)]

"""What every framework drop-in shares: the recall tools bound to a session, and chat messages in and out.

Invariants:

* The tools a drop-in offers are the engine's own (:data:`lossless.tools.TOOLS`, run by
  :func:`lossless.adapters.service.call_tool`): the same names, descriptions, argument schemas and
  access rules as over MCP and HTTP, run as a :class:`~lossless.retrieval.Caller` of the engine's
  agent in the drop-in's session.  A refused or invalid call comes back to the model as a JSON
  ``{"error": …}`` text, so the agent can correct itself; nothing else is swallowed.
* Messages cross as OpenAI chat dicts, the one format every framework here can convert to and
  from; :func:`chat_message` keeps the dict whole in the message's parts (tool calls with their
  ids and arguments, tool results with their call id), so the store holds what the framework held.
* :func:`context_chat` returns exactly what :meth:`ContextEngine.assemble` chose, within its
  budget; the recall guidance comes first as a system message when there is any.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lossless.adapters.service import call_tool
from lossless.engine import ContextEngine
from lossless.errors import InputError, LcmError
from lossless.records import JSONValue, Message
from lossless.retrieval import Caller
from lossless.tools import TOOLS, ToolSpec
from lossless.transcripts.openai_chat import chat_message as _chat_message

__all__ = [
    "DEFAULT_TOOLS",
    "MEMORY_TOOLS",
    "BoundTool",
    "ChatDict",
    "bound_tools",
    "chat_message",
    "check_budget",
    "check_session",
    "context_chat",
]

ChatDict = dict[str, Any]

#: The recall tools a main agent gets: search, look up, and ask a question of what was compacted.
DEFAULT_TOOLS: tuple[str, ...] = ("lcm_grep", "lcm_describe", "lcm_expand_query")
#: The long-term memory tools, offered on request (``memory=True``).
MEMORY_TOOLS: tuple[str, ...] = ("memory_recall", "memory_store", "memory_forget")


@dataclass(frozen=True, slots=True)
class BoundTool:
    """One engine tool bound to an engine and a session: call it with the model's arguments."""

    spec: ToolSpec
    engine: ContextEngine = field(repr=False)
    caller: Caller

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def description(self) -> str:
        return self.spec.description

    @property
    def parameters(self) -> dict[str, Any]:
        """The JSON Schema of the arguments."""
        return dict(self.spec.input_schema)

    async def __call__(self, arguments: Mapping[str, Any] | str | None) -> str:
        """Run the tool; the result (or the error the model should read) as JSON text."""
        try:
            if isinstance(arguments, str):
                arguments = json.loads(arguments) if arguments.strip() else {}
            if arguments is not None and not isinstance(arguments, Mapping):
                raise InputError(f"{self.name}: arguments must be a JSON object")
            result: Mapping[str, JSONValue] = await call_tool(self.engine, self.name, arguments, caller=self.caller)
        except json.JSONDecodeError as exc:
            return json.dumps({"error": f"{self.name}: arguments are not valid JSON ({exc})"})
        except LcmError as exc:
            return json.dumps({"error": str(exc)})
        return json.dumps(result, ensure_ascii=False)


def check_session(value: object, what: str = "session_id") -> str:
    """``value`` if it is a non-empty string, else :class:`InputError`."""
    if not isinstance(value, str) or not value:
        raise InputError(f"{what} must be a non-empty string, got {value!r}")
    return value


def check_budget(value: object) -> int:
    """``value`` if it is a positive integer token budget, else :class:`InputError`."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise InputError(f"token_budget must be a positive integer, got {value!r}")
    return value


def bound_tools(
    engine: ContextEngine, session_id: str, *, memory: bool = False, names: Sequence[str] | None = None
) -> list[BoundTool]:
    """The recall tools (and with ``memory`` the memory tools) of ``session_id``, bound to ``engine``."""
    chosen = list(names) if names is not None else [*DEFAULT_TOOLS, *(MEMORY_TOOLS if memory else ())]
    unknown = [n for n in chosen if n not in TOOLS]
    if unknown:
        raise InputError(f"unknown tool(s) {', '.join(unknown)}: the tools are {', '.join(TOOLS)}")
    caller = Caller(engine.config.agent_id, session_id=session_id)
    return [BoundTool(TOOLS[name], engine, caller) for name in chosen]


def chat_message(data: Mapping[str, Any], *, index: int = 0, event_key: str | None = None) -> Message:
    """Our message for one OpenAI chat dict (``role``, ``content``, ``tool_calls``, ``tool_call_id``)."""
    message = _chat_message(data, index=index, when=None, where="message", path="<framework>", line=None)
    # The reader keys a message by its place in a file; a live framework has no file, so no key
    # unless the caller has a stable one (a framework's own message id).
    return Message(message.role, message.content, message.parts, event_key=event_key, metadata=message.metadata)


async def context_chat(
    engine: ContextEngine, session_id: str, *, token_budget: int, prompt: str | None = None
) -> list[ChatDict]:
    """The context the engine would send now for ``session_id``, as OpenAI chat dicts (guidance first)."""
    assembled = await engine.assemble(session_id, token_budget=token_budget, prompt=prompt, output="openai")
    chat = [dict(m) for m in assembled.messages]
    if assembled.system_prompt_addition:
        chat.insert(0, {"role": "system", "content": assembled.system_prompt_addition})
    return chat

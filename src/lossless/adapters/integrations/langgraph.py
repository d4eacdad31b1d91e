"""The LangGraph drop-in: model hooks that store the graph's messages and send the assembled context,
a ``BaseStore`` on long-term memory, and the recall tools as LangChain tools.

Use::

    hooks = LosslessHooks(engine, token_budget=16_000)           # session = the graph's thread_id
    agent = create_react_agent(model, lossless_tools(engine, "thread-1"),
                               pre_model_hook=hooks.pre_model_hook, post_model_hook=hooks.post_model_hook,
                               store=LosslessStore(engine))

Invariants:

* ``pre_model_hook`` stores every message of the graph state the engine has not stored yet and
  returns ``llm_input_messages``: the context the engine assembles within ``token_budget``.  The
  graph's own ``messages`` state is left as it is (the hook never rewrites it).
  ``post_model_hook`` stores the model's answer right away (so a run's last answer is stored too).
  A message's ``event_key`` is its LangChain id, so a message is stored once however often the
  hooks see it.
* The session is the ``session_id`` given, else the run's ``thread_id``; neither is an error.
* :class:`LosslessStore` keeps each ``(namespace, key)`` item as one memory whose fact key is the
  pair and whose metadata holds the value as given; ``put`` on an existing key supersedes it (the
  old value stays as history), ``put(…, None)`` forgets it.  ``scope_for`` maps a namespace to a
  memory scope (default: the engine agent's own scope; :func:`namespace_scope` maps
  ``("user", id)`` to ``user:<id>`` and so on).  Only the async API is served.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from lossless.adapters.integrations.bridge import bound_tools, chat_message, check_budget, check_session, context_chat
from lossless.engine import ContextEngine
from lossless.errors import InputError, LcmError, MissingDependencyError, NotFoundError, StoreError
from lossless.memory.records import Memory, MemoryDraft
from lossless.records import Message

try:
    from langchain_core.messages import BaseMessage, convert_to_messages, convert_to_openai_messages
    from langchain_core.runnables import RunnableConfig
    from langchain_core.tools import BaseTool, StructuredTool
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        Item,
        ListNamespacesOp,
        Op,
        PutOp,
        Result,
        SearchItem,
        SearchOp,
    )
except ImportError as exc:  # pragma: no cover - exercised where the extra is missing
    raise MissingDependencyError("the LangGraph drop-in", "langgraph", exc.name or "langgraph") from exc

__all__ = ["LosslessHooks", "LosslessStore", "lossless_tools", "namespace_scope", "to_message"]


def to_message(message: BaseMessage) -> Message:
    """Our message for one LangChain message (its id, when it has one, is the event key)."""
    (chat,) = convert_to_openai_messages([message])
    key = f"lc:{message.id}" if message.id else None
    return chat_message(chat, event_key=key)


class LosslessHooks:
    """``pre_model_hook`` / ``post_model_hook`` for LangGraph's prebuilt agent (or any graph's nodes)."""

    def __init__(self, engine: ContextEngine, *, token_budget: int = 16_000, session_id: str | None = None) -> None:
        if session_id is not None:
            check_session(session_id, "session_id (or None: the run's thread_id)")
        self.engine = engine
        self.token_budget = check_budget(token_budget)
        self.session_id = session_id
        self._stored: set[str] = set()

    def _session(self, config: RunnableConfig | None) -> str:
        if self.session_id is not None:
            return self.session_id
        thread = ((config or {}).get("configurable") or {}).get("thread_id")
        if not thread:
            raise InputError("no session: give LosslessHooks a session_id, or run the graph with a thread_id")
        return str(thread)

    async def _store(self, session: str, messages: Sequence[Any]) -> None:
        new = [m for m in convert_to_messages(messages) if not (m.id and m.id in self._stored)]
        if not new:
            return
        done = await self.engine.after_turn(session, [to_message(m) for m in new], token_budget=self.token_budget)
        if done.error and done.ingest.conversation_id is None:
            raise StoreError(f"the graph's messages were not stored: {done.error}")
        self._stored.update(m.id for m in new if m.id)

    async def pre_model_hook(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        """Store the state's new messages; the model gets the assembled context instead of the whole list."""
        session = self._session(config)
        await self._store(session, _messages(state))
        chat = await context_chat(self.engine, session, token_budget=self.token_budget)
        return {"llm_input_messages": convert_to_messages(chat)}

    async def post_model_hook(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        """Store the model's newest answer (no change to the state)."""
        messages = _messages(state)
        if messages:
            await self._store(self._session(config), messages[-1:])
        return {}


def _messages(state: Any) -> list[Any]:
    messages = state.get("messages") if isinstance(state, dict) else getattr(state, "messages", None)
    return list(messages or [])


def lossless_tools(engine: ContextEngine, session_id: str, *, memory: bool = False) -> list[BaseTool]:
    """The recall tools (and with ``memory`` the memory tools) of ``session_id`` as LangChain tools."""

    def tool(bound: Any) -> BaseTool:
        async def run(**arguments: Any) -> str:
            return str(await bound(arguments))

        return StructuredTool.from_function(
            coroutine=run, name=bound.name, description=bound.description, args_schema=bound.parameters
        )

    return [tool(bound) for bound in bound_tools(engine, session_id, memory=memory)]


# ---------------------------------------------------------------------- long-term memory


def namespace_scope(namespace: tuple[str, ...]) -> str:
    """A namespace as a memory scope: ``("user", id)`` → ``user:id`` (also ``project``, ``agent``,
    ``custom``), ``("global",)`` → ``global``; other namespaces → ``custom:<a>:<b>…``."""
    if namespace == ("global",):
        return "global"
    if len(namespace) >= 2 and namespace[0] in ("user", "project", "agent", "custom"):
        return f"{namespace[0]}:{namespace[1]}"
    return "custom:" + ":".join(namespace)


def _fact_key(namespace: tuple[str, ...], key: str) -> str:
    fact = "lg:" + json.dumps([*namespace, key], ensure_ascii=False, separators=(",", ":"))
    if len(fact) > 200:
        raise InputError("a LangGraph namespace and key must be under 190 characters together")
    return fact


class LosslessStore(BaseStore):
    """A LangGraph store whose items are long-term memories: searchable by meaning, with history kept."""

    supports_ttl = False

    def __init__(
        self,
        engine: ContextEngine,
        *,
        scope_for: Callable[[tuple[str, ...]], str] | None = None,
        category: str = "entities",
    ) -> None:
        self.engine = engine
        self.scope_for = scope_for or (lambda _namespace: f"agent:{engine.config.agent_id}")
        self.category = category

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        raise LcmError("LosslessStore serves LangGraph's async API only: run the graph with ainvoke/astream")

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                found = await self._find(op.namespace, op.key)
                results.append(_item(found, search=False) if found else None)
            elif isinstance(op, PutOp):
                await self._put(op)
                results.append(None)
            elif isinstance(op, SearchOp):
                results.append(await self._search(op))
            elif isinstance(op, ListNamespacesOp):
                results.append(await self._namespaces(op))
            else:
                raise InputError(f"unknown store operation {type(op).__name__}")
        return results

    async def _find(self, namespace: tuple[str, ...], key: str) -> Memory | None:
        memory = self.engine.memory()
        listed = await memory.list(scopes=[self.scope_for(namespace)], fact_key=_fact_key(namespace, key), limit=1)
        return listed[0][1] if listed else None

    async def _put(self, op: PutOp) -> None:
        memory = self.engine.memory()
        old = await self._find(op.namespace, op.key)
        if op.value is None:
            if old is not None:
                await memory.forget(old.memory_id)
            return
        if not isinstance(op.value, dict):
            raise InputError(f"a store value must be a dict, got {type(op.value).__name__}")
        text = op.value.get("content") or op.value.get("text") or op.value.get("memory")
        draft = MemoryDraft(
            content=text if isinstance(text, str) and text.strip() else json.dumps(op.value, ensure_ascii=False),
            category=op.value.get("category", self.category),
            scope=self.scope_for(op.namespace),
            fact_key=_fact_key(op.namespace, op.key),
            metadata={"langgraph": {"namespace": list(op.namespace), "key": op.key, "value": op.value}},
        )
        if old is None:
            await memory.add(draft, scope=draft.scope)
        else:
            await memory.supersede(old.memory_id, draft)

    async def _all(self) -> list[Memory]:
        return [
            memory
            async for memory in self.engine.memory().export()
            if memory.superseded_by is None and _langgraph(memory) is not None
        ]

    async def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = tuple(op.namespace_prefix)
        wanted = op.limit + op.offset

        def keep(memory: Memory) -> bool:
            meta = _langgraph(memory)
            if meta is None or tuple(meta["namespace"][: len(prefix)]) != prefix:
                return False
            return all(meta["value"].get(k) == v for k, v in (op.filter or {}).items())

        if op.query:
            result = await self.engine.memory().search(op.query, limit=max(wanted * 4, 20), record_access=False)
            hits: list[tuple[Memory, float | None]] = [(h.memory, h.score) for h in result.hits if keep(h.memory)]
        else:
            hits = [(m, None) for m in sorted(await self._all(), key=lambda m: m.updated_at, reverse=True) if keep(m)]
        return [_item(m, score) for m, score in hits[op.offset : wanted]]

    async def _namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        spaces = sorted({tuple(meta["namespace"]) for m in await self._all() if (meta := _langgraph(m))})
        for condition in op.match_conditions or ():
            path = tuple(condition.path)

            def matches(space: tuple[str, ...], path: tuple[str, ...] = path, kind: str = condition.match_type) -> bool:
                part = space[: len(path)] if kind == "prefix" else space[len(space) - len(path) :]
                return len(space) >= len(path) and all(p in ("*", s) for p, s in zip(path, part, strict=True))

            spaces = [s for s in spaces if matches(s)]
        if op.max_depth is not None:
            spaces = sorted({s[: op.max_depth] for s in spaces})
        return spaces[op.offset : op.offset + op.limit]


def _langgraph(memory: Memory) -> dict[str, Any] | None:
    meta = (memory.metadata or {}).get("langgraph")
    return meta if isinstance(meta, dict) else None


def _item(memory: Memory, score: float | None = None, *, search: bool = True) -> Any:
    """The store item of a memory: an ``Item`` for a get, a ``SearchItem`` (with its score) for a search."""
    meta = _langgraph(memory)
    if meta is None:
        raise NotFoundError("memory", memory.memory_id, "it was not written by LosslessStore")
    namespace, created = tuple(meta["namespace"]), memory.created_at
    if not search:
        return Item(
            value=dict(meta["value"]),
            key=meta["key"],
            namespace=namespace,
            created_at=created,
            updated_at=memory.updated_at,
        )
    return SearchItem(namespace, meta["key"], dict(meta["value"]), created, memory.updated_at, score)

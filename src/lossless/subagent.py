"""The expansion sub-agent port: what a sub-agent is asked, what it answers, and the tools it reads through.

``expand_query`` (:mod:`lossless.retrieval.expansion`) runs a sub-agent under a temporary grant;
the sub-agent itself is a port, so the retrieval core never imports a model client and the
model-backed runner (:mod:`lossless.providers.subagent`) never imports the retrieval core.

Invariants:

* Values are frozen; the protocols carry no state a caller must share.
* A runner reads the history only through the :class:`SubagentTools` it is handed (``lcm_grep``,
  ``lcm_describe``, ``lcm_expand`` under the grant); a refused call raises, and ends the run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from lossless.records import JSONValue

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "ExpansionAnswer",
    "ExpansionRunner",
    "ExpansionTask",
    "SubagentTools",
    "ToolReply",
]

#: How long an expansion answer may be unless asked otherwise (tokens).
DEFAULT_MAX_TOKENS = 2000


@dataclass(frozen=True, slots=True)
class ExpansionTask:
    """What the sub-agent is asked: a question, where to start, and how long its answer may be."""

    prompt: str
    summary_ids: tuple[str, ...] = ()
    query: str | None = None
    max_tokens: int = DEFAULT_MAX_TOKENS
    conversation_ids: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class ExpansionAnswer:
    """The sub-agent's answer and the ids (``msg#N``, ``sum_…``) it cites."""

    text: str
    cited: tuple[str, ...] = ()


class ToolReply(Protocol):
    """A tool call's result as the sub-agent sees it: the text a model reads, the data code reads."""

    @property
    def text(self) -> str: ...

    @property
    def data(self) -> Mapping[str, JSONValue]: ...

    @property
    def error(self) -> bool: ...


class SubagentTools(Protocol):
    """The sub-agent's tools, bound to its grant: ``await tools.call("lcm_grep", {...})``."""

    async def call(self, name: str, arguments: Mapping[str, Any]) -> ToolReply: ...


@runtime_checkable
class ExpansionRunner(Protocol):
    """Runs one expansion sub-agent: reads through ``tools`` only, and answers ``task``."""

    name: str

    async def run(self, task: ExpansionTask, tools: SubagentTools) -> ExpansionAnswer: ...

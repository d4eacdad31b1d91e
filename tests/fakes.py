"""Test doubles for the summarizer port (the shipped ones land in lossless.testing)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import anyio

from lossless.errors import ProviderUnavailable
from lossless.ports import SummaryRequest, SummaryResult


@dataclass
class ScriptedSummarizer:
    """Answers each call with the next behaviour in ``script`` (then repeats the last one).

    A behaviour is a string (returned), an exception (raised), ``"hang"`` (sleeps forever), or a
    callable taking the request and returning text.
    """

    script: list[object] = field(default_factory=lambda: ["short summary"])
    provider: str = "scripted"
    model: str | None = "test"
    calls: list[SummaryRequest] = field(default_factory=list)

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        self.calls.append(request)
        behaviour = self.script[min(len(self.calls) - 1, len(self.script) - 1)]
        if isinstance(behaviour, BaseException):
            raise behaviour
        if behaviour == "hang":
            await anyio.sleep(3600)
        if callable(behaviour):
            text = behaviour(request)
        else:
            text = str(behaviour)
        return SummaryResult(text, self.provider, self.model)


def head_of(words: int) -> Callable[[SummaryRequest], str]:
    """A summarizer behaviour: the first ``words`` words of the segment."""

    def answer(request: SummaryRequest) -> str:
        return " ".join(request.text.split()[:words])

    return answer


UNAVAILABLE = ProviderUnavailable("scripted", "circuit breaker open")

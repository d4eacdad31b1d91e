"""lossless.subagent: the expansion sub-agent port both runners implement (neither imports the other's layer)."""

from __future__ import annotations

from lossless.config import Config
from lossless.engine.wiring import expansion_runner_for
from lossless.providers.subagent import LLMExpansionRunner
from lossless.retrieval.expansion import ExpansionTask as ReExported
from lossless.retrieval.expansion import OfflineExpansionRunner
from lossless.subagent import DEFAULT_MAX_TOKENS, ExpansionRunner, ExpansionTask
from lossless.tokens import EstimatingCounter


def test_both_runners_are_expansion_runners() -> None:
    offline = expansion_runner_for(Config(), EstimatingCounter())
    assert isinstance(offline, OfflineExpansionRunner) and isinstance(offline, ExpansionRunner)
    model = LLMExpansionRunner("openai", "m", api_key="k", base_url="http://127.0.0.1:9", timeout_s=1)
    assert isinstance(model, ExpansionRunner)


def test_the_task_is_one_value_wherever_it_is_imported_from() -> None:
    assert ReExported is ExpansionTask
    assert ExpansionTask("q").max_tokens == DEFAULT_MAX_TOKENS

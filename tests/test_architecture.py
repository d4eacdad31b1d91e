"""docs/architecture.md stays true: the modules it names exist, and the backends' allow-list is whole."""

from __future__ import annotations

import importlib.util
import pkgutil
import re
import tomllib
from pathlib import Path

import lossless
import lossless.memory

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"
#: What a backend (stores, providers, testing) may import; the contract forbids everything else.
ALLOWED_FOR_BACKENDS = {
    "lossless._version",
    "lossless.constants",
    "lossless.errors",
    "lossless.parts",
    "lossless.records",
    "lossless.config",
    "lossless.tokens",
    "lossless.tools",
    "lossless.text",
    "lossless.ports",
    "lossless.subagent",
    "lossless.prompts",
    "lossless.memory.ports",
    "lossless.memory.records",
    "lossless.memory.hashing",
}
BACKENDS = {"lossless.stores", "lossless.providers", "lossless.testing"}


def _named_modules(text: str) -> set[str]:
    named = set(re.findall(r"\blossless(?:\.[a-z_]+)+", text))
    # "(facade, turn, …)" after lossless.engine names its modules too.
    for listed in re.findall(r"lossless\.engine\s+\(([^)]*)\)", text):
        named |= {f"lossless.engine.{name.strip()}" for name in listed.split(",")}
    return named


def _contract(name_start: str) -> dict[str, object]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    for contract in config["tool"]["importlinter"]["contracts"]:
        if contract["name"].startswith(name_start):
            return dict(contract)
    raise AssertionError(f"no contract named {name_start!r}…")


def test_every_module_the_doc_names_exists() -> None:
    named = _named_modules(DOC.read_text())
    assert "lossless.engine.wiring" in named and "lossless.engine.turn" in named  # the parser reads the doc
    missing = sorted(m for m in named if importlib.util.find_spec(m) is None)
    assert not missing, f"docs/architecture.md names modules that do not exist: {missing}"


def test_the_layers_contract_covers_every_package() -> None:
    layers = _contract("Layers")["layers"]
    assert isinstance(layers, list)
    layered = {name.strip() for layer in layers for name in re.split(r"[|:]", layer)}
    top = {f"lossless.{m.name}" for m in pkgutil.iter_modules(lossless.__path__)}
    assert top - layered == set()
    assert not _contract("Layers").get("ignore_imports")


def test_the_backends_allow_list_forbids_everything_else() -> None:
    contract = _contract("Backends import only")
    forbidden = set(contract["forbidden_modules"])  # type: ignore[arg-type]
    assert set(contract["source_modules"]) == BACKENDS  # type: ignore[arg-type]
    top = {f"lossless.{m.name}" for m in pkgutil.iter_modules(lossless.__path__)} - {"lossless.memory"}
    memory = {f"lossless.memory.{m.name}" for m in pkgutil.iter_modules(lossless.memory.__path__)}
    everything = (top | memory) - BACKENDS
    assert everything - ALLOWED_FOR_BACKENDS == forbidden, "every module not on the allow-list must be forbidden"


def test_only_the_wiring_imports_backends() -> None:
    contract = _contract("Only lossless.engine.wiring")
    assert contract["type"] == "protected"
    assert set(contract["protected_modules"]) == {"lossless.stores", "lossless.providers"}  # type: ignore[arg-type]
    assert contract["allowed_importers"] == ["lossless.engine.wiring"]

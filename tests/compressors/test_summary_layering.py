"""The summary compressor stays pure: no gateway, HTTP, Redis or web framework imports."""

from __future__ import annotations

import ast
from pathlib import Path

import compressors.summary

FORBIDDEN = ("gateway", "policies", "redis", "httpx", "fastapi", "starlette", "aiohttp", "requests")
PACKAGE = Path(compressors.summary.__file__).parent
SHARED = ("compressors.protocols", "compressors.flight", "compressors.messages", "compressors.lru")
"""The modules all compressors share; they import no compressor package themselves."""
RETRIEVAL = (
    "compressors.retrieval.chunking",
    "compressors.retrieval.codec",
    "compressors.retrieval.index",
    "compressors.retrieval.ranking",
    "compressors.retrieval.settings",
    "compressors.retrieval.tokenize",
)
"""The pure parts of retrieval that recall uses (chunking, BM25 and its tokenizer, the index codec), not
its strategy."""


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_summary_package_imports_nothing_forbidden() -> None:
    files = sorted(PACKAGE.glob("*.py"))
    assert len(files) > 5
    for path in files:
        bad = {name for name in _imports(path) if name.split(".")[0] in FORBIDDEN}
        assert not bad, f"{path.name} imports {bad}"


def test_summary_package_uses_no_sibling_internals_but_the_protocols_and_retrievals_index() -> None:
    used: set[str] = set()
    for path in PACKAGE.glob("*.py"):
        for name in _imports(path):
            if name.startswith("compressors.") and not name.startswith("compressors.summary"):
                assert name in SHARED or name in RETRIEVAL, f"{path.name} imports {name}"
                used.add(name)
    assert "compressors.retrieval.index" in used
    assert not any(name.startswith("compressors.retrieval.retriever") for name in used)


def test_retrieval_modules_used_by_recall_import_no_strategy_and_nothing_forbidden() -> None:
    for module in RETRIEVAL:
        path = PACKAGE.parent.joinpath(*module.split(".")[1:]).with_suffix(".py")
        for name in _imports(path):
            bad = name.startswith("compressors.") and name not in SHARED and name not in RETRIEVAL
            assert not bad and name.split(".")[0] not in FORBIDDEN, f"{path.name} imports {name}"


def test_shared_compressor_modules_import_no_compressor_package() -> None:
    for module in SHARED:
        path = PACKAGE.parent.joinpath(*module.split(".")[1:]).with_suffix(".py")
        for name in _imports(path):
            bad = name.startswith("compressors.") and name not in SHARED
            assert not bad and name.split(".")[0] not in FORBIDDEN, f"{path.name} imports {name}"

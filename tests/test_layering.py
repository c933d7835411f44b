"""The pure packages stay pure: ``policies/`` and ``compressors/`` import neither the service, nor HTTP,
nor Redis, nor each other; ``policies/`` imports only the standard library, pydantic and PyYAML; and no
package has an import circle."""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = {"gateway", "redis", "httpx", "fastapi", "starlette", "aiohttp", "httpx_aiohttp", "uvicorn"}
PURE = {"policies": FORBIDDEN | {"compressors"}, "compressors": FORBIDDEN | {"policies"}}
POLICIES_THIRD_PARTY = {"pydantic", "pydantic_core", "yaml", "typing_extensions"}


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, root: Path) -> Iterator[tuple[int, str]]:
    """Every module ``path`` imports, absolute, with its line; dynamic imports of constant names too."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module_name(path, root).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                yield node.lineno, ".".join([*base, node.module] if node.module else base)
            else:
                yield node.lineno, node.module or ""
        elif isinstance(node, ast.Call) and _is_dynamic_import(node.func):
            if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                yield node.lineno, node.args[0].value


def _is_dynamic_import(func: ast.expr) -> bool:
    if isinstance(func, ast.Name):
        return func.id in {"__import__", "import_module"}
    return isinstance(func, ast.Attribute) and func.attr == "import_module"


def violations(package: str, forbidden: set[str], root: Path = ROOT) -> list[str]:
    found = []
    for path in sorted((root / package).rglob("*.py")):
        for line, name in imports(path, root):
            if name.split(".")[0] in forbidden:
                found.append(f"{path.relative_to(root)}:{line} imports {name}")
    return found


@pytest.mark.parametrize("package", sorted(PURE))
def test_layering_pure_packages_import_no_service_http_redis_or_sibling(package: str) -> None:
    assert (ROOT / package / "__init__.py").is_file()
    assert violations(package, PURE[package]) == []


def test_layering_policies_import_only_stdlib_pydantic_and_yaml() -> None:
    allowed = set(sys.stdlib_module_names) | POLICIES_THIRD_PARTY | {"policies"}
    found: list[str] = []
    for path in sorted((ROOT / "policies").rglob("*.py")):
        found.extend(
            f"{path.relative_to(ROOT)}:{line} imports {name}"
            for line, name in imports(path, ROOT)
            if name.split(".")[0] not in allowed
        )
    assert found == []


@pytest.mark.parametrize(
    ("source", "where", "expected"),
    [
        ("import redis.asyncio\n", "policies/a.py", "policies/a.py:1 imports redis.asyncio"),
        (
            "import os\nfrom gateway.config.schema.root import X\n",
            "policies/a.py",
            "policies/a.py:2 imports gateway.config.schema.root",
        ),
        ("from compressors import summary\n", "policies/sub/b.py", "policies/sub/b.py:1 imports compressors"),
        (
            "import importlib\nimportlib.import_module('httpx')\n",
            "policies/a.py",
            "policies/a.py:2 imports httpx",
        ),
        ("__import__('starlette.routing')\n", "policies/a.py", "policies/a.py:1 imports starlette.routing"),
        ("def f():\n    import aiohttp\n", "policies/a.py", "policies/a.py:2 imports aiohttp"),
    ],
)
def test_layering_checker_catches_forbidden_imports(
    tmp_path: Path, source: str, where: str, expected: str
) -> None:
    path = tmp_path / where
    path.parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / "policies" / "__init__.py").write_text("")
    path.write_text(source)
    assert violations("policies", PURE["policies"], root=tmp_path) == [expected]


def test_layering_checker_resolves_relative_imports(tmp_path: Path) -> None:
    (tmp_path / "policies" / "sub").mkdir(parents=True)
    (tmp_path / "policies" / "__init__.py").write_text("")
    (tmp_path / "policies" / "sub" / "__init__.py").write_text("from . import x\nfrom ..y import z\n")
    (tmp_path / "policies" / "sub" / "m.py").write_text("from .x import a\nfrom .. import b\n")
    names = {
        path.name: [name for _, name in imports(path, tmp_path)]
        for path in (tmp_path / "policies" / "sub").glob("*.py")
    }
    assert names == {"__init__.py": ["policies.sub", "policies.y"], "m.py": ["policies.sub.x", "policies"]}


def test_starting_the_gateway_imports_no_retrieval_stack() -> None:
    """numpy and bm25s come with the first retrieval or recall, not with every worker's start."""
    import subprocess
    import sys

    probe = (
        "import sys, gateway.edge.app, gateway.edge.lifespan; "
        "print(sorted({'numpy', 'bm25s'} & set(sys.modules)))"
    )
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "[]"


def import_graph(package: str, root: Path = ROOT) -> dict[str, set[str]]:
    """Each module of ``package`` → the modules of ``package`` it imports, however (``TYPE_CHECKING``
    blocks and imports inside functions included: a circle there is still an upward arrow)."""
    paths = {module_name(path, root): path for path in sorted((root / package).rglob("*.py"))}
    graph: dict[str, set[str]] = {name: set() for name in paths}
    for name, path in paths.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found = {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
            elif isinstance(node, ast.Import):
                found = {alias.name for alias in node.names}
            else:
                continue
            graph[name] |= {other for other in found if other in paths and other != name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


@pytest.mark.parametrize("package", ["gateway", "policies", "compressors"])
def test_layering_package_has_no_import_circles(package: str) -> None:
    assert circles(import_graph(package)) == []


def test_layering_circle_checker_finds_a_circle_through_type_checking(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "low.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.high import High\n"
    )
    (tmp_path / "pkg" / "high.py").write_text("from pkg import low\n")
    (tmp_path / "pkg" / "alone.py").write_text("import pkg.low\n")
    assert circles(import_graph("pkg", tmp_path)) == [["pkg.high", "pkg.low"]]


LAYERS = (
    "gateway",
    "gateway.commands",
    "gateway.mockupstream",
    "gateway.edge",
    "gateway.dashboard",
    "gateway.fronts",
    "gateway.fronts.messages",
    "gateway.fronts.responses",
    "gateway.proxy",
    "gateway.responsecache",
    "gateway.experiments.report",
    "gateway.experiments",
    "gateway.analysis",
    "gateway.conversations",
    "gateway.alerts",
    "gateway.metrics",
    "gateway.telemetry",
    "gateway.core",
    "gateway.keys",
    "gateway.ratelimits",
    "gateway.upstream",
    "gateway.config",
    "gateway.sampling.report",
    "gateway.sampling.probes",
    "gateway.sampling",
    "gateway.ledger",
    "gateway.tokens",
    "gateway.money",
    "gateway.config.schema",
    "gateway.servertools",
    "gateway.base",
    "gateway.redis",
)
"""gateway/'s folders, top to bottom: a module imports its own folder and the folders below it, never one
above. A module belongs to the longest folder listed that holds it; ``gateway`` itself holds only the command
line's entry point, and what modules import of the package root (its version) is no arrow."""


def layer_of(module: str, layers: tuple[str, ...] = LAYERS) -> str | None:
    held = [layer for layer in layers if module == layer or module.startswith(layer + ".")]
    return max(held, key=len, default=None)


def upward_arrows(graph: dict[str, set[str]], layers: tuple[str, ...] = LAYERS) -> set[tuple[str, str]]:
    """Every import from a module to one in a layer above its own."""
    rank = {layer: index for index, layer in enumerate(layers)}
    root = layers[0]
    found = set()
    for module, imported in graph.items():
        mine = layer_of(module, layers)
        for other in imported:
            theirs = layer_of(other, layers)
            if other == root or mine is None or theirs is None:
                continue
            if rank[theirs] < rank[mine]:
                found.add((module, other))
    return found


def test_layering_every_gateway_module_is_in_a_listed_folder() -> None:
    """Only the command line's entry point lives at gateway/'s root: a new module goes in a folder, and a
    new folder takes its place in ``LAYERS``."""
    at_root = sorted(name for name in import_graph("gateway") if layer_of(name) == "gateway")
    assert at_root == ["gateway", "gateway.cli"]


def test_layering_gateway_imports_point_down_the_layers() -> None:
    assert upward_arrows(import_graph("gateway")) == set()


def test_layering_upward_checker_finds_an_arrow_up(tmp_path: Path) -> None:
    for folder in ("pkg", "pkg/high", "pkg/low", "pkg/low/deep"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "__init__.py").write_text("")
    (tmp_path / "pkg" / "high" / "a.py").write_text("from pkg.low.deep import b\n")
    (tmp_path / "pkg" / "low" / "deep" / "b.py").write_text("from pkg import __version__\n")
    (tmp_path / "pkg" / "low" / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.high.a import A\n"
    )
    layers = ("pkg", "pkg.high", "pkg.low")
    assert upward_arrows(import_graph("pkg", tmp_path), layers) == {("pkg.low.c", "pkg.high.a")}

"""The image installs pyproject.toml's dependencies and nothing else, so every third-party module the
service imports must come from a declared dependency (directly or through one)."""

from __future__ import annotations

import ast
import sys
import tomllib
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.deploy.manifests import ROOT

PACKAGES = ("gateway", "policies", "compressors")


def declared_requirements() -> list[Requirement]:
    with (ROOT / "pyproject.toml").open("rb") as file:
        return [Requirement(text) for text in tomllib.load(file)["project"]["dependencies"]]


def installed_closure(requirements: list[Requirement]) -> set[str]:
    """Canonical names of the declared distributions and everything they pull in (extras included)."""
    seen: set[str] = set()
    pending = [(requirement, frozenset(requirement.extras)) for requirement in requirements]
    while pending:
        requirement, extras = pending.pop()
        name = canonicalize_name(requirement.name)
        key = f"{name}[{','.join(sorted(extras))}]"
        if key in seen:
            continue
        seen.add(key)
        seen.add(name)
        for text in metadata.requires(requirement.name) or []:
            child = Requirement(text)
            environments = [{"extra": extra} for extra in extras] or [{"extra": ""}]
            if child.marker is None or any(child.marker.evaluate(env) for env in environments):
                pending.append((child, frozenset(child.extras)))
    return {name for name in seen if "[" not in name}


def third_party_imports(package: Path) -> Iterator[tuple[str, str]]:
    """(top-level module, where) for every absolute import outside the standard library and the project."""
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in PACKAGES and top != "__future__":
                    yield top, f"{path.relative_to(ROOT)}:{node.lineno}"


def test_image_dependency_closure_follows_extras() -> None:
    closure = installed_closure([Requirement("uvicorn[standard]")])
    assert {"uvicorn", "uvloop", "httptools"} <= closure
    assert "uvloop" not in installed_closure([Requirement("uvicorn")])


def test_image_dependencies_cover_every_runtime_import() -> None:
    closure = installed_closure(declared_requirements())
    providers = metadata.packages_distributions()
    missing = sorted(
        f"{where} imports {module} (from {', '.join(providers.get(module, ['an unknown distribution']))})"
        for package in PACKAGES
        for module, where in third_party_imports(ROOT / package)
        if not {canonicalize_name(dist) for dist in providers.get(module, [])} & closure
    )
    assert missing == [], "add these to [project] dependencies:\n" + "\n".join(missing)

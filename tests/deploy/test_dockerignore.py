""".dockerignore: Docker's matching rules as modelled here, and what the project's file keeps out."""

from __future__ import annotations

import pytest

from tests.deploy.dockerignore import in_context, parse_dockerignore
from tests.deploy.manifests import ROOT


@pytest.mark.parametrize(
    ("patterns", "path", "expected"),
    [
        (["*"], "README.md", False),
        (["*"], "gateway/edge/app.py", False),  # the directory matches, so everything below it goes
        (["*", "!gateway"], "gateway/edge/app.py", True),
        (["*", "!gateway/"], "gateway/commands/serve.py", True),
        (["*", "!deploy/gateway.example.yaml"], "deploy/gateway.example.yaml", True),
        (["*", "!deploy/gateway.example.yaml"], "deploy/Dockerfile", False),
        (["**/__pycache__"], "gateway/__pycache__/app.cpython-311.pyc", False),
        (["**/__pycache__"], "__pycache__/x.pyc", False),
        (["**/*.py[cod]"], "gateway/tokens/vocab.pyc", False),
        (["**/*.py[cod]"], "gateway/tokens/vocab.py", True),
        (["*.md"], "docs/guide.md", True),  # "*" does not cross a slash
        (["/tests"], "tests/conftest.py", False),
        (["tests", "!tests/keep.py"], "tests/keep.py", True),
        (["!tests/keep.py", "tests"], "tests/keep.py", False),  # the last match wins
        (["# a comment", ""], "anything", True),
        (["data?"], "data1/file", False),
        (["data?"], "data10/file", True),
    ],
)
def test_dockerignore_matching_follows_docker(patterns: list[str], path: str, expected: bool) -> None:
    assert in_context(parse_dockerignore("\n".join(patterns)), path) is expected


@pytest.mark.parametrize(
    "path",
    [
        ".venv/bin/python",
        ".git/HEAD",
        ".gateway-data/redis/appendonly.aof",
        ".gateway-data/default-tenant-key",
        ".env",
        "deploy/.env",
        "deploy/k8s/secret.example.yaml",
        "tests/conftest.py",
        "gateway/__pycache__/app.cpython-311.pyc",
        ".coverage",
    ],
)
def test_dockerignore_keeps_local_state_and_secrets_out_of_the_context(path: str) -> None:
    rules = parse_dockerignore((ROOT / ".dockerignore").read_text(encoding="utf-8"))
    assert not in_context(rules, path)


@pytest.mark.parametrize(
    "path",
    [
        "pyproject.toml",
        "README.md",
        "gateway/edge/app.py",
        "policies/default.yaml",
        "deploy/gateway.example.yaml",
    ],
)
def test_dockerignore_sends_what_the_build_needs(path: str) -> None:
    rules = parse_dockerignore((ROOT / ".dockerignore").read_text(encoding="utf-8"))
    assert in_context(rules, path)

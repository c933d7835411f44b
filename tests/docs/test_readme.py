"""The README's front page keeps its promises: its two commands are the ones CI and a newcomer run, its
two-minute try runs as written without a provider key (``tests.docs.reader``), and it fits on two screens."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.docs.reader import ROOT, Session, blocks, checkout, run_document, unknown
from tests.ports import free_port

README = ROOT / "README.md"
FRONT_PAGE_LINES = 120
"""Two screens of a laptop's terminal, give or take."""


@pytest.fixture
def session(tmp_path: Path) -> Iterator[Session]:
    reader = Session(checkout(tmp_path), free_port())
    try:
        yield reader
    finally:
        reader.stop()


def test_readme_fits_on_two_screens() -> None:
    assert len(README.read_text(encoding="utf-8").splitlines()) <= FRONT_PAGE_LINES


def test_readme_commands_are_what_ci_and_a_newcomer_run() -> None:
    commands = next(b for b in blocks(README) if b.fence == "sh")
    assert [line.split("#")[0].strip() for line in commands.code.splitlines()] == ["./bin/run", "./bin/test"]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert re.search(r"^exec \./bin/test$", ci, re.M)


def test_readme_blocks_are_all_run_or_checked() -> None:
    found = blocks(README)
    assert unknown(found) == []
    assert [b.marker for b in found].count("terminal 1") == 1


def test_readme_two_minute_try_runs_as_written(session: Session) -> None:
    start = next(b for b in blocks(README) if b.marker == "terminal 1")
    assert "--mock-upstream" in start.code
    run_document(session, blocks(README))

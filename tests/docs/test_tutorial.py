"""The tutorial (docs/tutorial.md) runs as written: every command, every printed output (``tests.docs.reader``
says how its blocks are read)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.docs.reader import ROOT, Session, blocks, checkout, matches, run_document, unknown
from tests.ports import free_port

TUTORIAL = ROOT / "docs" / "tutorial.md"


@pytest.fixture
def session(tmp_path: Path) -> Iterator[Session]:
    reader = Session(checkout(tmp_path), free_port())
    try:
        yield reader
    finally:
        reader.stop()


def test_tutorial_blocks_are_all_run_or_checked() -> None:
    found = blocks(TUTORIAL)
    assert found
    assert unknown(found) == []
    assert [b.marker for b in found].count("terminal 1") == 1
    assert "not run" not in [b.marker for b in found]


def test_tutorial_runs_as_written(session: Session) -> None:
    run_document(session, blocks(TUTORIAL))


@pytest.mark.parametrize(
    ("expected", "output", "result"),
    [
        ("a\nb", "a\nb", True),
        ("a…c", "abbbc", True),
        ("a…c", "abbbd", False),
        ("a\n…\nd", "a\nb\nc\nd", True),
        ("a\n…\nd", "a\nd", True),
        ("a\n…", "a\nb\nc", True),
        ("a\nb", "a\nb\nc", False),
        ("a\nb", "a", False),
        ("x.y", "xzy", False),
    ],
)
def test_tutorial_output_matching(expected: str, output: str, result: bool) -> None:
    assert matches(expected, output) is result

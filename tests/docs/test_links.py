"""Every relative link of the README and docs/ leads somewhere: to a file of the checkout and, with a
``#fragment``, to a heading of that page (as GitHub names its anchors). Pages move; links must follow."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.docs.reader import ROOT

PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*```.*?^\s*```", re.M | re.S)


def anchors(page: Path) -> set[str]:
    """GitHub's anchors of a page's headings: lowercased, punctuation dropped, spaces as hyphens, and a
    number after a repeated one."""
    seen: dict[str, int] = {}
    found = set()
    for heading in re.findall(r"^#+ (.+)$", FENCE.sub("", page.read_text(encoding="utf-8")), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def broken(page: Path) -> list[str]:
    problems = []
    for target in LINK.findall(FENCE.sub("", page.read_text(encoding="utf-8"))):
        if re.match(r"[a-z]+:", target):
            continue  # http:, https:, mailto:
        path, _, fragment = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            problems.append(f"{target}: no such file")
        elif fragment and linked.suffix == ".md" and fragment not in anchors(linked):
            problems.append(f"{target}: no such heading")
    return problems


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_links_lead_somewhere(page: Path) -> None:
    assert broken(page) == []


def test_links_checker_finds_a_missing_page_and_heading(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# A title, here\n\n[ok](#a-title-here) [b](b.md#nope) [c](c.md)\n")
    (tmp_path / "b.md").write_text("# B\n")
    assert broken(tmp_path / "a.md") == ["b.md#nope: no such heading", "c.md: no such file"]


def test_docs_are_all_reachable_from_the_readme() -> None:
    """No page of docs/ is an orphan: each is linked from the README or from a page that is."""
    reached, todo = set(), [ROOT / "README.md"]
    while todo:
        page = todo.pop()
        if page in reached:
            continue
        reached.add(page)
        for target in LINK.findall(page.read_text(encoding="utf-8")):
            path = target.partition("#")[0]
            linked = (page.parent / path).resolve() if path and not re.match(r"[a-z]+:", path) else None
            if linked is not None and linked.suffix == ".md" and linked.exists():
                todo.append(linked)
    assert sorted(str(p.relative_to(ROOT)) for p in PAGES if p not in reached) == []

"""The experiment report leads with what a reader comes for, the projected monthly difference, and says why
shadow calls were shed rather than only how many."""

from __future__ import annotations

import re

import pytest

from gateway.config.schema.limits import Limits
from gateway.experiments.report.html import render_html
from gateway.experiments.report.table import render_report
from gateway.experiments.shed import shed_reason
from tests.gateway.test_experiments_report import report_of, same_pairs, shadow_config

TRAFFIC = {"n:0": 400, "cost:0": 2_000_000_000, "shadowed": 40}
PROJECTION = "projected difference for all matching traffic: -$6.40 a month, from 1 bucket"


def test_html_leads_with_the_monthly_projection_and_says_it_once() -> None:
    page = render_html(report_of(same_pairs(40, tokens=10), TRAFFIC, config=shadow_config()))
    body = page[page.index("<body>") :]
    first = re.search(r"</h1>\s*<p class=\"headline\">(.*?)</p>", body)
    assert first is not None and first.group(1) == "P" + PROJECTION[1:]
    assert body.count(PROJECTION[1:]) == 1  # not repeated in the verdicts below it
    assert body.index("headline") < body.index("<table")


def test_text_report_gives_the_projection_in_its_summary_before_the_tables() -> None:
    lines = render_report(report_of(same_pairs(40, tokens=10), TRAFFIC, config=shadow_config())).splitlines()
    assert lines[3] == PROJECTION  # title, window, spend, then the projection
    assert lines[-1] == f"  {PROJECTION}"  # and again among the verdicts at the end


def test_a_report_with_nothing_to_project_says_so_at_the_top() -> None:
    lines = render_report(report_of([], TRAFFIC, config=shadow_config())).splitlines()
    assert lines[3].startswith("projected difference a month: none yet")


def test_shed_calls_come_with_their_reasons() -> None:
    traffic = {**TRAFFIC, "shed": 47, "shed_slots": 40, "shed_cpu": 5}
    report = report_of(same_pairs(40, tokens=10), traffic, config=shadow_config(max_concurrency=4))
    note = (
        "shed 47: dropped rather than queued, so the primary's answer never waits on them: 40 with no free"
        " slot (max_concurrency 4 calls of this experiment, or limits.shadow_calls of the process, running);"
        " 5 with the process busy (over limits.shadow_shed_above_cpu of a core); 2 counted before reasons"
        " were"
    )
    assert report.shed_note() == note
    assert note in render_report(report).splitlines()
    assert f"{note}." in render_html(report).replace("&#x27;", "'")


def test_nothing_shed_says_nothing() -> None:
    assert report_of(same_pairs(40, tokens=10), TRAFFIC, config=shadow_config()).shed_note() is None


LIMITS = Limits(shadow_calls=16, shadow_shed_above_cpu=0.8, shadow_shed_above_requests=256)


@pytest.mark.parametrize(
    ("running", "in_flight", "cpu", "tasks", "reason"),
    [
        (0, 0, 0.1, 10, None),
        (4, 4, 0.1, 10, "slots"),  # the experiment's own slots
        (1, 16, 0.1, 10, "slots"),  # the process's
        (1, 1, 0.9, 10, "cpu"),
        (1, 1, 0.1, 257, "tasks"),
        (4, 16, 0.9, 257, "slots"),  # the first that holds
    ],
)
def test_shed_reason(running: int, in_flight: int, cpu: float, tasks: int, reason: str | None) -> None:
    found = shed_reason(
        running=running, max_concurrency=4, in_flight=in_flight, cpu_share=cpu, tasks=tasks, limits=LIMITS
    )
    assert found == reason

"""The behaviour map tells the truth about size and confidence: buckets by the tokens the model received
(with the size received beside it), the action mix and the sample count of every cell, thin buckets marked,
and a "no boundary" that says whether there were enough samples to look."""

from __future__ import annotations

import re
from dataclasses import replace

from gateway.config.schema.sampling import BoundaryConfig, SamplingConfig
from gateway.sampling.report.document import report_document
from gateway.sampling.report.html import render_html
from gateway.sampling.report.report import BehaviourReport, build_report
from gateway.sampling.report.table import render_report
from gateway.sampling.signals import Signal
from tests.gateway.test_sampling_factories import NOW, make_signal, planted_signals


def report_of(signals: list[Signal], **config: object) -> BehaviourReport:
    return build_report(
        signals, [], model="gpt-5.4", since=NOW - 3600, until=NOW, config=SamplingConfig(**config)
    )


def compressed(count: int, *, received: int = 300_000, forwarded: int = 20_000) -> list[Signal]:
    return [
        make_signal(request_id=f"c{n}", action="compress", prompt_tokens=received, forwarded_tokens=forwarded)
        for n in range(count)
    ]


def forwarded(count: int, tokens: int = 20_000) -> list[Signal]:
    return [
        make_signal(request_id=f"f{n}", prompt_tokens=tokens, forwarded_tokens=tokens) for n in range(count)
    ]


def test_report_buckets_by_the_tokens_the_model_received() -> None:
    report = report_of(compressed(10))
    by_label = {stats.bucket.label: stats for stats in report.buckets}
    assert by_label["8K-32K"].count == 10  # forwarded 20K, though the client sent 300K
    assert by_label["272K-1M"].count == 0


def test_report_falls_back_to_prompt_tokens_when_a_sample_has_no_forwarded_count() -> None:
    report = report_of([make_signal(prompt_tokens=40_000, forwarded_tokens=None)])
    assert [stats.count for stats in report.buckets if stats.count] == [1]
    assert next(stats for stats in report.buckets if stats.count).bucket.label == "32K-128K"


def test_report_shows_the_size_received_and_the_action_mix_per_bucket() -> None:
    signals = compressed(10) + forwarded(30)
    stats = next(stats for stats in report_of(signals).buckets if stats.count)
    assert stats.actions == {"forward": 30, "compress": 10}
    assert stats.received_mean == 90_000  # (10 x 300K + 30 x 20K) / 40
    assert stats.received_tokens is not None and stats.received_tokens.p50 == 20_000
    bucket = report_document(report_of(signals))["buckets"][1]
    assert bucket["actions"] == {"forward": 30, "compress": 10}
    assert bucket["received_tokens"]["mean"] == 90_000 and bucket["received_tokens"]["p50"] == 20_000


def test_report_marks_buckets_with_fewer_samples_than_min_count() -> None:
    report = report_of(forwarded(30, 2_000) + forwarded(5, 20_000), boundary=BoundaryConfig(min_count=20))
    enough = [stats.enough_samples for stats in report.buckets]
    assert enough == [True, False, False, False, False, False]
    document = report_document(report)
    assert [bucket["enough_samples"] for bucket in document["buckets"]] == enough
    assert document["min_count"] == 20


def test_no_boundary_says_there_were_too_few_samples_to_look() -> None:
    report = report_of(forwarded(30, 2_000) + forwarded(5, 20_000))
    assert report.boundary is None
    table = render_report(report)
    assert "boundary: too few samples to look (1 bucket with at least 20 samples" in table
    assert "none found" not in table
    assert "too few samples to look" in report_document(report)["boundary_note"]
    html = render_html(report)
    assert "too few samples to look" in html and "No effective-context boundary found" not in html


def test_no_boundary_found_says_across_how_many_buckets_with_enough_samples() -> None:
    report = report_of(planted_signals(cliff_at=10**9, per_bucket=30))
    assert report.boundary is None
    assert "boundary: none found across 6 buckets with enough samples (at least 20 each)" in render_report(
        report
    )
    assert report_document(report)["boundary_note"].startswith("none found across 6 buckets")
    assert "No effective-context boundary found across 6 buckets with enough samples" in render_html(report)


def test_boundary_note_is_null_when_a_boundary_is_found() -> None:
    report = report_of(planted_signals(cliff_at=128_000, per_bucket=30, ttft_factor=3.0, overhead=0.02))
    assert report.boundary is not None and report_document(report)["boundary_note"] is None


def test_table_shows_counts_received_size_actions_and_thin_buckets() -> None:
    signals = compressed(10) + forwarded(30) + forwarded(5, 2_000)
    out = render_report(report_of(signals))
    first, second = (line for line in out.splitlines() if line.startswith("0-8K"))
    assert "5 (few)" in first and "(few)" in second  # both tables mark the thin bucket
    rows = [line for line in out.splitlines() if line.startswith("8K-32K")]
    assert "(few)" not in "".join(rows)
    assert "90K" in rows[0] and "20K" in rows[0]  # received: mean, p50
    assert re.search(r"1 / 1 / 1 \(40\)", rows[0])  # latency p10 / p50 / p90 and its count
    assert "forward 30, compress 10" in rows[1]
    assert "(few): fewer than 20 samples" in out


def heat_rows(page: str) -> dict[tuple[str, str], list[tuple[str, str]]]:
    """The heatmap's body rows by (group, statistic): each cell as (its attributes, its content)."""
    heatmap = page[page.index('<table class="heatmap"') :]
    body = heatmap[heatmap.index("<tbody>") : heatmap.index("</table>")]
    rows: dict[tuple[str, str], list[tuple[str, str]]] = {}
    group = ""
    for row in re.findall(r"<tr>(.*?)</tr>", body):
        found = re.search(r'<th class="group"[^>]*>(.*?)</th>', row)
        group = found.group(1) if found else group
        stat = re.search(r'<th class="stat">(.*?)</th>', row)
        assert stat is not None, row
        rows[(group, stat.group(1))] = re.findall(r"<td([^>]*)>(.*?)</td>", row)
    return rows


def hues(cells: list[tuple[str, str]]) -> list[int]:
    return [int(hue) for attributes, _ in cells for hue in re.findall(r"background:hsl\((\d+),", attributes)]


def test_html_shows_the_count_of_every_cell_and_greys_thin_buckets() -> None:
    signals = compressed(10) + forwarded(30) + forwarded(5, 2_000)
    page = render_html(report_of(signals))
    rows = heat_rows(page)
    assert rows
    for key, cells in rows.items():
        (thin, thin_text), (_, full_text) = cells[0], cells[1]
        assert "thin" in thin and "background" not in thin, (key, thin)
        for text in (thin_text, full_text):
            assert text == "-" or re.search(r'<span class="n">\d+</span>', text), (key, text)
    assert '<span class="n">5</span>' in rows[("latency (main call)", "p50")][0][1]
    assert '<span class="n">40</span>' in rows[("latency (main call)", "p50")][1][1]
    heatmap = page[page.index('<table class="heatmap"') :]
    head = heatmap[: heatmap.index("<tbody>")]
    assert "received" in head and "actions" in head
    assert "90K" in head  # the size received (mean) beside the bucket of the tokens forwarded
    assert "compress 10" in head and "forward 30" in head


def test_html_does_not_paint_every_cell_red() -> None:
    """The colour scale is the model's own range per row, not 1.5x the best bucket: the cells of a signal
    that grows steadily with context go from green through yellow, and only the worst is red."""
    signals = planted_signals(cliff_at=250_000, per_bucket=40, error_rate_after=0.3)
    rows = heat_rows(render_html(report_of(signals)))
    every = [hue for cells in rows.values() for hue in hues(cells)]
    reddish = [hue for hue in every if hue <= 20]
    assert every and len(reddish) < len(every) / 4, (len(reddish), len(every))
    ttft = hues(rows[("time to first token", "p50")])
    assert ttft[0] == 120 and min(ttft) == 0
    assert len(set(ttft)) >= 4  # graded, not green-or-red


def test_html_row_that_barely_varies_stays_green() -> None:
    signals = [replace(signal, ttft=0.3, latency=1.0) for signal in planted_signals(cliff_at=10**9)]
    rows = heat_rows(render_html(report_of(signals)))
    assert set(hues(rows[("time to first token", "p50")])) == {120}
    assert set(hues(rows[("latency (main call)", "p90")])) == {120}

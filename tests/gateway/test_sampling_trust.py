"""What the behaviour map claims it can back: no boundary from the speed of short answers, no tokens per
second that no model writes taken at face value, and no cell painted from a handful of samples."""

from __future__ import annotations

from gateway.sampling.report.html import render_html
from gateway.sampling.signals import Signal
from tests.gateway.test_sampling_factories import make_signal, planted_signals
from tests.gateway.test_sampling_map import heat_rows, hues, report_of

SIZES = (4_000, 20_000, 60_000)
"""One prompt size in each of the first three buckets."""


def answers(tokens: int, speeds: tuple[float, ...], per_bucket: int = 40) -> list[Signal]:
    """``per_bucket`` answers of ``tokens`` output tokens in each bucket of ``SIZES``, at ``speeds``."""
    return [
        make_signal(
            request_id=f"req_{size}_{number}",
            prompt_tokens=size,
            output_tokens=tokens,
            tokens_per_second=speed,
            ttft=0.3,
        )
        for size, speed in zip(SIZES, speeds, strict=True)
        for number in range(per_bucket)
    ]


def test_no_boundary_from_the_speed_of_short_answers() -> None:
    """21-token answers at 60 then 20 tokens/s: their rate is the call's overhead, which grows with the
    prompt, not the model writing slower."""
    slowing = (60.0, 40.0, 20.0)
    assert report_of(answers(21, slowing)).boundary is None
    long_enough = report_of(answers(300, slowing)).boundary
    assert long_enough is not None and long_enough.signals == ("tokens_per_second",)


def test_short_answers_give_no_speed_in_the_map() -> None:
    report = report_of(answers(21, (60.0, 40.0, 20.0)))
    assert all(stats.tokens_per_second is None for stats in report.buckets)
    assert "Tokens / s: of answers of 100+ tokens" in render_html(report)


def test_an_implausible_speed_is_flagged_and_not_compared() -> None:
    """72,086 tokens/s is an answer delivered at once: it is marked, said in words, and a fall from it to
    a real speed is no boundary."""
    report = report_of(answers(300, (72_086.0, 80.0, 80.0)))
    assert report.boundary is None
    page = render_html(report)
    row = heat_rows(page)[("tokens / s", "p50")]
    assert "implausible" in row[0][0] and "background" not in row[0][0] and row[0][1].endswith(" ?")
    assert "implausible" not in row[1][0] and "background" in row[1][0]
    assert "Implausible tokens per second (above 5,000, marked ?): p10 72,086 at 0-8K" in page


def test_slowest_decile_cells_of_a_few_requests_are_greyed_not_coloured() -> None:
    """40 requests a bucket: the slowest tenth is 4 of them, too few to colour."""
    rows = heat_rows(render_html(report_of(planted_signals(cliff_at=250_000, per_bucket=40))))
    for name in ("logprob p10", "output p10"):
        cells = rows[("slowest 10%", name)]
        assert cells and hues(cells) == [], name
        assert all("thin" in attributes for attributes, _ in cells), name
    enough = rows[("latency (main call)", "p50")]
    assert hues(enough)  # the bucket itself has enough samples: its own rows are coloured


def test_a_slowest_decile_of_enough_requests_is_coloured() -> None:
    many = report_of(planted_signals(cliff_at=10**9) * 4)  # 240 a bucket: a slowest tenth of 24
    assert hues(heat_rows(render_html(many))[("slowest 10%", "output p10")])

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

from gateway.config.schema.sampling import BoundaryConfig, SamplingConfig
from gateway.sampling.report.html import COLUMNS, render_html
from gateway.sampling.report.report import BehaviourReport, build_report
from gateway.sampling.report.shading import severity
from tests.gateway.test_sampling_factories import NOW, make_probe, planted_signals


class Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.styles: list[str] = []
        self.text: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in_style = tag == "style"
        if dict(attrs).get("style"):
            self.styles.append(dict(attrs)["style"] or "")

    def handle_endtag(self, tag: str) -> None:
        self._in_style = False

    def handle_data(self, data: str) -> None:
        (self.styles if self._in_style else self.text).append(data)


def sample_report(model: str = "gpt-5.4") -> BehaviourReport:
    probes = [
        make_probe(
            model=model, length=length, depth=depth, prompt_tokens=length + 40, recalled=length < 250_000
        )
        for length in (8_000, 128_000, 256_000)
        for depth in (0.1, 0.5, 0.9)
    ]
    signals = planted_signals(cliff_at=250_000, per_bucket=40, error_rate_after=0.3)
    return build_report(signals, probes, model=model, since=NOW - 86_400, until=NOW, config=SamplingConfig())


def parse(document: str) -> Collector:
    collector = Collector()
    collector.feed(document)
    collector.close()
    return collector


def test_html_report_is_self_contained() -> None:
    page = parse(render_html(sample_report()))
    names = [tag for tag, _ in page.tags]
    assert "script" not in names and "link" not in names and "img" not in names and "iframe" not in names
    for tag, attrs in page.tags:
        for name in ("src", "href", "action", "srcset", "data"):
            value = attrs.get(name)
            assert value is None or not re.match(r"\s*(https?:)?//", value), (tag, name, value)
    css = " ".join(page.styles)
    assert "@import" not in css and "url(" not in css and "@font-face" not in css
    assert any(tag == "style" for tag, _ in page.tags)  # the CSS is inline


def test_html_report_marks_the_boundary_and_degraded_cells() -> None:
    report = sample_report()
    assert report.boundary is not None and report.boundary.bucket.label == "250K-272K"
    page = parse(render_html(report))
    text = " ".join(page.text)
    assert "Effective-context boundary: 250K-272K" in text
    header = [attrs for tag, attrs in page.tags if tag == "th" and attrs.get("class") == "boundary"]
    assert len(header) == 2  # the bucket's label and its sample count
    degraded = [attrs for tag, attrs in page.tags if tag == "td" and "degraded" in (attrs.get("class") or "")]
    assert len(degraded) == len(report.boundary.degradations) + len(
        [d for d in report.degradations if d.bucket != report.boundary.bucket]
    )
    cells = [attrs for tag, attrs in page.tags if tag == "td"]
    recall_cells = len(report.recall.lengths) * (len(report.recall.depths) + 2)
    assert len(cells) == len(COLUMNS) * len(report.buckets) + recall_cells
    assert "needle probe recall" in text.lower() or "Needle probe recall" in text


def test_html_report_escapes_the_model_name() -> None:
    document = render_html(sample_report(model='<img src="http://x/y.png">'))
    assert "<img" not in document
    assert "&lt;img src=&quot;http://x/y.png&quot;&gt;" in document


def test_html_report_without_boundary_says_so() -> None:
    signals = planted_signals(cliff_at=10**9, per_bucket=30)
    report = build_report(signals, [], model="m", since=NOW - 60, until=NOW)
    text = " ".join(parse(render_html(report)).text)
    assert "No effective-context boundary found" in text


@pytest.mark.parametrize(
    ("bad", "best", "kind", "expected"),
    [(1.0, 1.0, "level", 0.0), (1.5, 1.0, "level", 1.0), (1.25, 1.0, "level", 0.5), (0.9, 1.0, "level", 0.0),
     (0.0, 0.0, "rate", 0.0), (0.3, 0.0, "rate", 1.0), (0.01, 0.0, "rate", 0.2)],
)  # fmt: skip
def test_severity_shades_against_the_best_bucket(bad: float, best: float, kind: str, expected: float) -> None:
    assert severity(bad, best, kind, BoundaryConfig()) == pytest.approx(expected)  # type: ignore[arg-type]

from __future__ import annotations

import re
import struct
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from gateway.config.schema.experiments import ExperimentConfig
from gateway.config.schema.sampling import DEFAULT_BUCKET_EDGES
from gateway.experiments.report.html import render_html
from gateway.experiments.report.report import ExperimentReport, build_report
from gateway.experiments.report.rows import rows_for
from tests.gateway.experiment_factories import DAY_MS, NOW_MS, make_pair, make_side, planted_pairs

CHROMIUM = Path("/usr/bin/chromium")
CONFIG = ExperimentConfig(
    mode="shadow", primary=("gpt-5.4",), candidate="gpt-5.4-mini", sample_rate=0.1, budget_usd_per_day="20",
    match={"min_tokens": 8000},  # type: ignore[arg-type]
)  # fmt: skip
TRAFFIC = {"n:8000": 400, "cost:8000": 2_000_000_000, "n:128000": 400, "cost:128000": 2_000_000_000,
           "n:0": 50, "cost:0": 10_000_000, "shadowed": 80, "shed": 3}  # fmt: skip


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

    def cells(self) -> list[dict[str, str | None]]:
        return [attrs for tag, attrs in self.tags if tag == "td"]


def parse(document: str) -> Collector:
    collector = Collector()
    collector.feed(document)
    collector.close()
    return collector


def planted_report(name: str = "mini", extra: list[dict[str, Any]] | None = None) -> ExperimentReport:
    failed = make_pair(999, tokens=300_000, primary=make_side(), candidate=make_side("m", error="timeout"))
    pairs = [*planted_pairs(), failed, *(extra or [])]
    return build_report(
        name, CONFIG, pairs, TRAFFIC, edges=DEFAULT_BUCKET_EDGES, since_ms=NOW_MS - 7 * DAY_MS,
        until_ms=NOW_MS, spent_today_nanos=3_210_000_000,
    )  # fmt: skip


def heatmap_cells(report: ExperimentReport) -> int:
    return len(rows_for(shadow=report.mode == "shadow")) * len(report.buckets)


def test_experiment_html_is_self_contained() -> None:
    page = parse(render_html(planted_report()))
    names = [tag for tag, _ in page.tags]
    assert "script" not in names and "link" not in names and "img" not in names and "iframe" not in names
    for tag, attrs in page.tags:
        for name in ("src", "href", "action", "srcset", "data"):
            value = attrs.get(name)
            assert value is None or not re.match(r"\s*(https?:)?//", value), (tag, name, value)
    css = " ".join(page.styles)
    assert "@import" not in css and "url(" not in css and "@font-face" not in css
    assert any(tag == "style" for tag, _ in page.tags)


def test_experiment_html_escapes_names_and_request_ids() -> None:
    hostile = make_pair(7, tokens=20_000, primary=make_side(), candidate=make_side("m"),
                        agreement={"kind": "text", "score": 0.0, "method": "overlap"})  # fmt: skip
    hostile["id"] = '<script>alert("x")</script>'
    document = render_html(planted_report(name='<img src="http://x/y.png">', extra=[hostile]))
    assert "<img" not in document and "<script" not in document
    assert "&lt;img src=&quot;http://x/y.png&quot;&gt;" in document
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in document


def test_experiment_html_shades_the_candidate_against_the_primary() -> None:
    report = planted_report()
    page = parse(render_html(report))
    cells = page.cells()
    facts = 4 + 6  # the facts table: budget, spend, matching, cost, and the shadow counters
    worst = sum(len(item.comparison.agreement.worst) for item in report.buckets if item.comparison.agreement)
    assert len(cells) == facts + heatmap_cells(report) + 5 * worst
    labels = [item.bucket.label for item in report.buckets]
    slow = labels.index("128K-250K")
    rows = rows_for(shadow=True)
    latency_p50 = next(index for index, row in enumerate(rows) if row.name == "p50 candidate")
    start = facts + latency_p50 * len(labels)
    row = cells[start : start + len(labels)]
    assert row[slow].get("style") == "background:hsl(0,70%,80%)"  # 3x slower: red
    assert row[labels.index("8K-32K")].get("style") == "background:hsl(120,70%,80%)"  # as fast: green
    assert row[labels.index("272K-1M")].get("class") in ("thin", "empty thin")  # 1 pair: greyed
    primary = cells[start - len(labels) : start]
    assert primary[slow].get("class") == "plain"  # the reference is not judged


def test_experiment_html_greys_thin_buckets_and_gives_the_verdicts() -> None:
    page = parse(render_html(planted_report()))
    text = " ".join(page.text)
    thin = [attrs for tag, attrs in page.tags if tag == "th" and "thin" in (attrs.get("class") or "")]
    assert len(thin) == 4 * 4  # four header rows of the four buckets without 30 pairs
    assert "272K-1M: 1 pair, too few to compare (30 needed)" in text
    assert "Projected difference for all matching traffic: -$12.80 a month, from 2 buckets" in text
    assert "0-8K: no pairs: projects nothing" in text
    assert "Least agreement" in text and "req_000041" in text
    assert "$3.21 (16%)" in text and "shed" in text


def test_experiment_html_of_a_split_has_arms_and_no_agreement() -> None:
    pairs = [make_pair(n, tokens=20_000, mode="split", arm="primary" if n % 2 else "candidate",
                       primary=make_side(), candidate=make_side("m")) for n in range(80)]  # fmt: skip
    config = ExperimentConfig(mode="split", primary=("gpt-5.4",), candidate="m", sample_rate=0.5)
    report = build_report("s", config, pairs, {"split_candidate": 40, "split_primary": 40},
                          edges=DEFAULT_BUCKET_EDGES, since_ms=NOW_MS - DAY_MS, until_ms=NOW_MS,
                          spent_today_nanos=0)  # fmt: skip
    page = parse(render_html(report))
    text = " ".join(page.text)
    assert "p50 candidate arm" in text and "requests: candidate / primary arm" in text
    assert "agreement" not in [row.group for row in rows_for(shadow=False)]
    assert "Least agreement" not in text and "split candidate" in text and "shadowed" not in text
    assert "split full" in text
    assert len(page.cells()) == 4 + 4 + heatmap_cells(report)  # the split counters and excluded


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


if CHROMIUM.exists():
    # Collected only where a browser is installed (``apt-get install chromium``); see
    # docs/concepts/experiments.md, "Experiments report". The screenshot is for a person to look at; the
    # DOM dump shows the browser read the whole table.

    def test_experiment_html_renders_in_headless_chromium(tmp_path: Path) -> None:
        report = planted_report()
        page = tmp_path / "report.html"
        page.write_text(render_html(report), encoding="utf-8")
        shot = tmp_path / "report.png"
        browser = [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
        subprocess.run([*browser, f"--screenshot={shot}", "--window-size=1400,2400", page.as_uri()],
                       check=True, capture_output=True, timeout=120)  # fmt: skip
        assert _png_size(shot) == (1400, 2400)
        dumped = subprocess.run([*browser, "--dump-dom", page.as_uri()], check=True, capture_output=True,
                                timeout=120, text=True)  # fmt: skip
        rendered = parse(dumped.stdout)
        assert len(rendered.cells()) == len(parse(render_html(report)).cells())
        assert "Verdict" in " ".join(rendered.text)

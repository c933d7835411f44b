"""The user's own words told from what they pasted, by the shape of lines: instructions before, after and
between pastes survive; logs, code, data, quotes and traces go; long prose is kept from both ends."""

from __future__ import annotations

import random

import pytest

from compressors.summary.words import own_words, prose_shaped, split
from tests.fixtures.haystack import ProseGenerator, TiktokenCounter, o200k_encoding

LIMIT = 1_000


@pytest.fixture(scope="module")
def counter() -> TiktokenCounter:
    return TiktokenCounter(o200k_encoding())


def log(lines: int, *, seed: int = 1) -> str:
    rng = random.Random(seed)
    return "\n".join(
        f"2024-05-01T12:{n // 60 % 60:02d}:{n % 60:02d}.{rng.randint(0, 999):03d}Z INFO "
        f"[worker-{rng.randint(1, 9)}] request id={rng.getrandbits(40):x} "
        f"took {rng.randint(1, 900)}ms status=200"
        for n in range(lines)
    )


def access_log(lines: int) -> str:
    """Lines that open with a word: a server's access log."""
    return "\n".join(
        f'INFO:     10.0.0.{n % 255}:{5000 + n} - "GET /api/items/{n} HTTP/1.1" 200 OK' for n in range(lines)
    )


def code(copies: int) -> str:
    body = [
        "import os",
        "import sys",
        "",
        "class Store:",
        "    def __init__(self, path):",
        "        self.path = path",
        "",
        "    def load(self):",
        "        with open(self.path) as f:",
        "            return f.read()",
    ]
    return "\n".join(body * copies)


def quote(text: str, *, limit: int, counter: TiktokenCounter) -> str:
    return own_words(text, limit=limit, counter=counter).text


def marker(text: str) -> str:
    return text.split("[\u2026 ", 1)[1].split(" \u2026]", 1)[0]


def test_an_instruction_before_a_log_is_kept_and_the_log_left_out(counter: TiktokenCounter) -> None:
    message = "Also: all timestamps are UTC ISO 8601. Here is the next log:\n" + log(400)
    assert counter.count_text(message) > 9_000
    words = quote(message, limit=LIMIT, counter=counter)
    assert words.startswith("Also: all timestamps are UTC ISO 8601. Here is the next log:\n[\u2026 ")
    assert "tokens of pasted material left out by the gateway \u2026]" in words
    assert "request id=" not in words and counter.count_text(words) <= LIMIT


def test_a_paste_on_the_same_line_as_the_instruction_is_cut_after_its_sentence(
    counter: TiktokenCounter,
) -> None:
    message = "Also: all timestamps are UTC ISO 8601. Here is the next log: " + log(400)
    words = quote(message, limit=LIMIT, counter=counter)
    assert words.startswith("Also: all timestamps are UTC ISO 8601. Here is the next log:\n[\u2026 ")
    assert "2024-05-01" not in words


def test_a_long_sentence_glued_to_a_short_first_log_line_is_cut_too(counter: TiktokenCounter) -> None:
    said = "Rule 32: When the service restarts, the queue must be drained first, never dropped. Data:"
    message = f"{said} 2024-05-08T18:50:00Z WARN slow call 223ms\n" + log(300)
    words = quote(message, limit=LIMIT, counter=counter)
    assert words.startswith(f"{said}\n[\u2026 ") and "slow call" not in words


@pytest.mark.parametrize(
    ("paste", "label"),
    [
        (log(300), "a log"),
        (access_log(300), "an access log that opens with words"),
        ("```python\n" + code(30) + "\n```", "fenced code"),
        (code(30), "code with no fence"),
        (
            "\n".join(f'  File "/app/m{n}.py", line {n}, in f{n}\n    return g{n}(x)' for n in range(60)),
            "a trace",
        ),
        ("\n".join(f'{{"id": {n}, "name": "item{n}", "price": {n}.5}},' for n in range(200)), "JSON"),
        ("\n".join(f"{n},{n * 3},{n % 7},2024-01-{n % 28 + 1:02d}" for n in range(400)), "CSV"),
        ("\n".join("> " + ProseGenerator(n).sentence() for n in range(120)), "a quoted email"),
        (
            "\n".join(
                ["diff --git a/x.py b/x.py", "@@ -1,4 +1,5 @@", "-def old():", "+def new():", " context line"]
                * 60
            ),
            "a diff",
        ),
        ("\n".join(f"worker pool item {n} ready" for n in range(80)), "output that reads like words"),
    ],
)
def test_instructions_before_and_after_any_paste_are_kept_verbatim(
    paste: str, label: str, counter: TiktokenCounter
) -> None:
    before, after = "Please review what follows carefully.", "Answer in metric units, in a table."
    words = quote(f"{before}\n{paste}\n{after}", limit=LIMIT, counter=counter)
    assert words.split("\n") == [before, words.split("\n")[1], after], label
    assert "pasted material" in marker(words), label
    assert int(marker(words).split()[0].replace(",", "")) >= counter.count_text(paste) * 0.9, label


def test_an_instruction_between_two_pastes_is_kept(counter: TiktokenCounter) -> None:
    first = "\n".join(f'{{"id": {n}, "price": {n}.5}}' for n in range(150))
    second = "\n".join(f'{{"id": {n}, "price": {n}.9}}' for n in range(150))
    message = (
        f"Two payloads. First:\n{first}\nand the second one, compare the prices with the first:\n{second}"
    )
    lines = quote(message, limit=LIMIT, counter=counter).split("\n")
    assert (
        lines[0] == "Two payloads. First:"
        and lines[2] == "and the second one, compare the prices with the first:"
    )
    assert lines[1].startswith("[\u2026 ") and lines[3].startswith("[\u2026 ") and len(lines) == 4


def test_a_typed_list_of_rules_beside_a_paste_is_kept_whole(counter: TiktokenCounter) -> None:
    rules = [
        "Rules for this project:",
        "- Use UTC timestamps everywhere.",
        "- never log personal data",
        "1. Every endpoint needs a test",
        "2) Answer in metric units.",
        "Now the data:",
    ]
    data = "\n".join(f"{n},{n * 3},{n % 7}" for n in range(400))
    words = quote("\n".join(rules) + "\n" + data, limit=LIMIT, counter=counter)
    assert words.split("\n")[:-1] == rules


def test_a_short_command_or_path_among_the_words_stays(counter: TiktokenCounter) -> None:
    message = (
        "Deploy with this command and nothing else:\nmake deploy ENV=staging\nHere is the last run:\n"
        + log(300)
        + "\nThe config lives in /etc/app/app.yaml on every host."
    )
    words = quote(message, limit=LIMIT, counter=counter)
    assert words.startswith(
        "Deploy with this command and nothing else:\nmake deploy ENV=staging\nHere is the last run:\n[\u2026 "
    )
    assert words.endswith("\nThe config lives in /etc/app/app.yaml on every host.")


def test_a_short_line_right_against_a_paste_goes_with_it(counter: TiktokenCounter) -> None:
    words = quote("Deploy with this command:\nmake deploy\n" + log(300), limit=LIMIT, counter=counter)
    assert words.split("\n")[0] == "Deploy with this command:" and "make deploy" not in words


def test_long_prose_keeps_its_lines_from_both_ends_and_says_it_is_all_prose(counter: TiktokenCounter) -> None:
    prose = ProseGenerator(3)
    middle = [" ".join(prose.sentence() for _ in range(4)) for _ in range(60)]
    first, last = "Summarise this article in three bullet points:", "Keep it under 100 words."
    message = "\n\n".join([first, *middle, last])
    words = own_words(message, limit=LIMIT, counter=counter)
    assert not words.beside_paste
    lines = words.text.split("\n")
    kept = [line for line in lines if line]
    assert kept[0] == first and kept[1] == middle[0] and kept[-2] == middle[-1] and kept[-1] == last
    [left_out] = [line for line in kept if line.startswith("[\u2026")]
    assert left_out.endswith("tokens of this message left out by the gateway \u2026]")
    assert all(line in [first, *middle, last] for line in kept if line != left_out)  # whole lines
    assert words.text.startswith(f"{first}\n\n{middle[0]}")  # the blank lines between them, as typed
    assert 700 < counter.count_text(words.text) <= LIMIT


def test_an_end_stops_at_a_line_too_long_for_an_edge(counter: TiktokenCounter) -> None:
    prose = ProseGenerator(4)
    blob = " ".join(prose.sentence() for _ in range(400))
    words = own_words(f"Here is the deployment log from last night:\n{blob}", limit=LIMIT, counter=counter)
    assert not words.beside_paste
    assert words.text.startswith("Here is the deployment log from last night:\n[\u2026 ")
    assert words.text.endswith(" tokens of this message left out by the gateway \u2026]")
    assert own_words(blob, limit=LIMIT, counter=counter).text == ""  # one blob: no words to tell


def test_one_line_of_words_beside_a_paste_too_long_for_the_limit_keeps_its_first_words(
    counter: TiktokenCounter,
) -> None:
    prose = ProseGenerator(4)
    said = " ".join(prose.sentence() for _ in range(200))
    words = own_words(f"{said}\n{log(200)}", limit=300, counter=counter)
    assert words.beside_paste
    head, mark = words.text.rsplit("\n", 1)
    assert said.startswith(head) and len(head) > 600
    assert mark.startswith("[\u2026 ") and mark.endswith(
        "tokens of this message left out by the gateway \u2026]"
    )
    assert counter.count_text(words.text) <= 300


def test_a_bare_paste_has_no_words_of_the_user(counter: TiktokenCounter) -> None:
    assert quote(log(300), limit=LIMIT, counter=counter) == ""
    assert quote("```\n" + code(5) + "\n```", limit=LIMIT, counter=counter) == ""


def test_split_gives_the_text_back_in_runs_of_words_and_pastes() -> None:
    text = "Look at this:\n```\nx = 1\n```\n\nWhy is x one?"
    pieces = split(text)
    assert [(p.text, p.pasted) for p in pieces] == [
        ("Look at this:", False),
        ("```\nx = 1\n```", True),
        ("\nWhy is x one?", False),
    ]
    assert "\n".join(p.text for p in pieces) == text


def test_an_unclosed_fence_runs_to_the_end() -> None:
    pieces = split("Explain this to me:\n~~~\nshort\n```\nstill inside")
    assert [(p.text, p.pasted) for p in pieces] == [
        ("Explain this to me:", False),
        ("~~~\nshort\n```\nstill inside", True),
    ]


@pytest.mark.parametrize(
    ("line", "shaped"),
    [
        ("Also: all timestamps are UTC ISO 8601.", True),
        ("- Use tabs, not spaces", True),
        ("3. Run the tests before pushing", True),
        ('"Quoted words count too," she said.', True),
        ("import os", False),  # too few words
        ("    return self.path", False),  # indented
        ("> a quoted line of an email", False),
        ("| a | table | row |", False),
        ("2024-05-01T12:00:03Z INFO worker started", False),  # opens with a number
        ('{"id": 1, "name": "x"}', False),
        ("self.items = [parse(x) for x in rows]", False),  # code symbols
    ],
)
def test_prose_shaped_lines(line: str, shaped: bool) -> None:
    assert prose_shaped(line) is shaped

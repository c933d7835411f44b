"""The ``experiments:`` section: validated with the rest of the config, names resolved across sections."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from gateway.config.experiments import index_of, matches, sampled
from gateway.config.loading import ConfigError, load_config
from gateway.experiments.agreement import agreement, token_overlap
from gateway.experiments.answer import Answer, ToolCall, answer_of
from gateway.experiments.judge import parse_grade
from gateway.fronts.responses.stream import answer_of as responses_answer_of
from tests.factories import make_config, write_config


def experiment(**fields: Any) -> dict[str, Any]:
    return {
        "mode": "shadow",
        "primary": ["gpt-5.4"],
        "candidate": "gpt-5.2",
        "sample_rate": 0.1,
        "budget_usd_per_day": 3,
        **fields,
    }


def load(tmp_path: Path, **experiments: dict[str, Any]) -> Any:
    return load_config(write_config(tmp_path / "gateway.yaml", make_config(experiments=experiments)))


def test_a_valid_experiment_loads(tmp_path: Path) -> None:
    config = load(tmp_path, trial=experiment(match={"headers": {"X-Team": "search"}, "min_tokens": 1000}))
    trial = config.experiments["trial"]
    assert trial.primary == ("gpt-5.4",) and trial.match.headers == {"x-team": "search"}


@pytest.mark.parametrize(
    ("fields", "where", "message"),
    [
        ({"candidate": "nope"}, "experiments.trial.candidate", "unknown model 'nope'"),
        ({"primary": ["gpt-5.4", "ghost"]}, "experiments.trial.primary.1", "unknown model 'ghost'"),
        ({"candidate": "text-embedding-3-small"}, "experiments.trial.candidate", "embedding model"),
        (
            {"match": {"tenants": ["initech"]}},
            "experiments.trial.match.tenants.0",
            "unknown tenant 'initech'",
        ),
        ({"embedding_model": "gpt-5.2"}, "experiments.trial.embedding_model", "not a configured embedding"),
        ({"budget_usd_per_day": None}, "experiments.trial", "needs budget_usd_per_day"),
        ({"candidate": "gpt-5.4"}, "experiments.trial", "must not be one of the primary"),
        ({"sample_rate": 1.5}, "experiments.trial.sample_rate", "less than or equal to 1"),
        ({"match": {"min_tokens": 500, "max_tokens": 100}}, "experiments.trial.match", "above min_tokens"),
    ],
)
def test_a_bad_experiment_is_refused_with_its_place(
    tmp_path: Path, fields: dict[str, Any], where: str, message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, trial=experiment(**fields))
    text = str(caught.value)
    assert where in text and message in text
    assert re.search(r"gateway\.yaml:\d+: ", text)  # the loader names the line, as for every other section


def test_the_index_watches_only_enabled_shadow_experiments_and_every_split(tmp_path: Path) -> None:
    config = make_config(
        experiments={
            "on": experiment(),
            "off": experiment(enabled=False),
            "rollout": {**experiment(mode="split"), "enabled": False},
        }
    )
    config["tenants"]["globex"]["experiments"] = False
    index = index_of(load_config(write_config(tmp_path / "gateway.yaml", config)))
    assert [watch.name for watch in index.shadows["gpt-5.4"]] == ["on"]
    assert [watch.name for watch in index.splits["gpt-5.4"]] == ["rollout"]
    [on] = index.shadows["gpt-5.4"]
    assert matches(on, tenant="acme", headers={}, tokens=10, index=index)
    assert not matches(on, tenant="globex", headers={}, tokens=10, index=index)  # the tenant opted out


def test_matching_by_tenant_header_and_size(tmp_path: Path) -> None:
    config = load(
        tmp_path,
        trial=experiment(
            match={"tenants": ["acme"], "headers": {"x-team": "a"}, "min_tokens": 100, "max_tokens": 200}
        ),
    )
    index = index_of(config)
    [trial] = index.shadows["gpt-5.4"]
    good = {"tenant": "acme", "headers": {"x-team": "a"}, "tokens": 150, "index": index}
    assert matches(trial, **good)
    assert not matches(trial, **{**good, "tenant": "globex"})
    assert not matches(trial, **{**good, "headers": {"x-team": "b"}})
    assert not matches(trial, **{**good, "tokens": 200})
    assert not matches(trial, **{**good, "tokens": 99})


def test_sampling_follows_the_rate_and_differs_between_experiments(tmp_path: Path) -> None:
    index = index_of(load(tmp_path, a=experiment(sample_rate=0.1), b=experiment(sample_rate=0.1)))
    first, second = index.shadows["gpt-5.4"]
    ids = [f"req_{number:06d}" for number in range(10_000)]
    picked_a = {rid for rid in ids if sampled(first, rid)}
    picked_b = {rid for rid in ids if sampled(second, rid)}
    assert 900 < len(picked_a) < 1_100 and 900 < len(picked_b) < 1_100
    assert len(picked_a & picked_b) < 200  # independent, not the same tenth


def test_tool_agreement_compares_arguments_as_json() -> None:
    primary = Answer(calls=(ToolCall("search", '{"q": "paris", "n": 3}'),))
    assert agreement(primary, Answer(calls=(ToolCall("search", '{"n":3,"q":"paris"}'),))).score == 1.0
    other_args = agreement(primary, Answer(calls=(ToolCall("search", '{"q": "rome"}'),)))
    assert (other_args.score, other_args.same_tool, other_args.same_args) == (0.5, True, False)
    other_tool = agreement(primary, Answer(calls=(ToolCall("grep", "{}"),)))
    assert (other_tool.score, other_tool.same_tool) == (0.0, False)
    assert agreement(primary, Answer(text="I would search.")).kind == "tool"  # one side called a tool


def test_text_agreement_by_overlap_or_embeddings() -> None:
    assert token_overlap("Paris is the capital", "the capital is Paris") == 1.0
    assert token_overlap("Paris", "Rome") == 0.0
    assert 0.5 < token_overlap("the capital of France is Paris", "Paris is the capital") < 1.0
    by_vectors = agreement(Answer(text="a"), Answer(text="b"), similarity=0.83)
    assert (by_vectors.method, by_vectors.score) == ("embedding", 0.83)


def test_answers_are_read_from_chat_and_responses_shapes() -> None:
    chat = {"choices": [{"message": {"content": "hi", "tool_calls": [
        {"function": {"name": "f", "arguments": "{}"}}]}, "finish_reason": "tool_calls"}]}  # fmt: skip
    assert answer_of(chat) == Answer("hi", (ToolCall("f", "{}"),), "tool_calls")
    responses = {
        "status": "completed",
        "output": [
            {"type": "message", "content": [{"type": "output_text", "text": "hello"}]},
            {"type": "function_call", "name": "g", "arguments": '{"x": 1}'},
        ],
    }
    assert responses_answer_of(responses) == Answer("hello", (ToolCall("g", '{"x": 1}'),), "tool_calls")
    assert answer_of(responses) == responses_answer_of(chat) == answer_of(None) == Answer()


@pytest.mark.parametrize(("text", "grade"), [("8", 0.8), ("Grade: 10/10", 1.0), ("0", 0.0), ("none", None)])
def test_the_judges_grade_is_read(text: str, grade: float | None) -> None:
    assert parse_grade(text) == grade


def test_check_config_lists_the_experiments(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from gateway.cli import main

    path = write_config(
        tmp_path / "gateway.yaml",
        make_config(
            experiments={"trial": experiment(), "rollout": {**experiment(mode="split"), "enabled": False}}
        ),
    )
    assert main(["check-config", str(path)]) == 0
    out = capsys.readouterr().out
    assert "experiment trial (shadow): gpt-5.4 -> gpt-5.2, 10%, $3/day" in out
    assert "experiment rollout (split (disabled)): gpt-5.4 -> gpt-5.2, 10%, $3/day" in out


def test_the_example_configs_experiments_load_when_uncommented(tmp_path: Path) -> None:
    example = (Path(__file__).parents[2] / "deploy" / "gateway.example.yaml").read_text()
    head, _, tail = example.partition("experiments: {}\n")
    uncommented = "experiments:\n" + "".join(
        line.removeprefix("#") + "\n" for line in tail.splitlines() if line.startswith("#  ")
    )
    path = tmp_path / "gateway.yaml"
    path.write_text(head + uncommented)
    config = load_config(path, env={"OPENAI_API_KEY": "sk", "DEFAULT_TENANT_KEY": "k"})
    assert set(config.experiments) == {"mini-on-long-chats", "mini-rollout"}


def test_the_process_load_is_the_share_of_a_core_used_over_the_window() -> None:
    from gateway.experiments.load import ProcessLoad

    clock = {"wall": 100.0, "cpu": 5.0}
    load = ProcessLoad(window=2, wall=lambda: clock["wall"], cpu=lambda: clock["cpu"])

    def spend(wall: float, cpu: float) -> float:
        clock["wall"] += wall
        clock["cpu"] += cpu
        load.sample()
        return load.share

    load.sample()
    assert spend(0.2, 0.01) == pytest.approx(0.05)  # idle: wall time passes, hardly any CPU
    assert spend(0.2, 0.2) == pytest.approx(0.525)  # half of the two-sample window was busy
    assert spend(0.2, 0.2) == pytest.approx(1.0)  # the window holds only busy time now

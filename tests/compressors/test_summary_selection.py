from __future__ import annotations

import pytest

from compressors.protocols import Message
from compressors.summary.selection import Block, group_blocks, select
from tests.compressors.test_summary_fakes import CharCounter, conversation, make_settings, tool_exchange


def test_group_blocks_keeps_tool_answers_with_their_call_and_skips_system_messages() -> None:
    messages: list[Message] = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "u"},
        *tool_exchange(1, calls=2),
        {"role": "developer", "content": "d"},
        {"role": "assistant", "content": "done"},
    ]
    assert group_blocks(messages) == (Block((1,)), Block((2, 3, 4)), Block((6,)))


def test_group_blocks_keeps_a_legacy_function_answer_and_a_leading_orphan_tool_message() -> None:
    messages: list[Message] = [
        {"role": "tool", "tool_call_id": "x", "content": "orphan"},
        {"role": "assistant", "content": None, "function_call": {"name": "f", "arguments": "{}"}},
        {"role": "function", "name": "f", "content": "42"},
    ]
    assert group_blocks(messages) == (Block((0,)), Block((1, 2)))


@pytest.mark.parametrize(
    ("turns", "split"),
    [(0, 5), (None, 5), (1, 4), (2, 2), (3, 0), (9, 0)],
)
def test_select_by_turn_count_keeps_whole_user_led_turns(turns: int | None, split: int) -> None:
    messages = conversation(3)
    selection = select(messages, settings=make_settings(keep_recent_turns=turns), counter=CharCounter())
    assert selection.split == split
    assert selection.last_user == 5


def test_select_by_tokens_keeps_the_longest_tail_of_whole_blocks_within_the_budget() -> None:
    counter = CharCounter()
    messages = conversation(3)
    last_two = counter.count_messages(messages[-2:]) - counter.count_messages([])
    for budget, split in [(last_two, 4), (last_two - 1, 5), (0, 5)]:
        settings = make_settings(keep_recent_turns=None, keep_recent_tokens=budget)
        assert select(messages, settings=settings, counter=counter).split == split


def test_select_with_both_rules_keeps_the_floor_of_turns_even_over_the_aim() -> None:
    counter = CharCounter()
    messages = conversation(3)
    one_message = counter.count_messages(messages[-1:]) - counter.count_messages([])
    settings = make_settings(keep_recent_turns=2, keep_recent_tokens=one_message)
    assert select(messages, settings=settings, counter=counter).split == 2
    roomy = make_settings(keep_recent_turns=2, keep_recent_tokens=10**6)
    assert select(messages, settings=roomy, counter=counter).split == 0
    no_floor = make_settings(keep_recent_turns=0, keep_recent_tokens=one_message)
    assert select(messages, settings=no_floor, counter=counter).split == 5


@pytest.mark.parametrize("turns", [None, 0])
def test_select_without_aim_or_floor_keeps_the_newest_block_only(turns: int | None) -> None:
    messages = conversation(3)
    settings = make_settings(keep_recent_turns=turns, keep_recent_tokens=None)
    selection = select(messages, settings=settings, counter=CharCounter())
    assert selection.split == 5
    assert selection.kept(len(messages)) == [0, 5, 6]
    ending = messages[:-1]  # the newest block is the last user message, which stays anyway
    assert select(ending, settings=settings, counter=CharCounter()).split == 5


def test_select_keeps_the_newest_step_even_when_no_rule_keeps_it() -> None:
    counter = CharCounter()
    messages: list[Message] = [
        {"role": "user", "content": "go"},
        *tool_exchange(1),
        *tool_exchange(2, calls=3),
    ]
    settings = make_settings(keep_recent_turns=0, keep_recent_tokens=1)
    selection = select(messages, settings=settings, counter=counter)
    assert selection.split == 2
    assert selection.summarized() == [1, 2]
    assert selection.kept(len(messages)) == [0, 3, 4, 5, 6]


def test_select_never_cuts_inside_a_tool_pair() -> None:
    counter = CharCounter()
    messages: list[Message] = [{"role": "user", "content": "go"}, *tool_exchange(1, calls=3)]
    answers_only = counter.count_messages(messages[2:]) - counter.count_messages([])
    settings = make_settings(keep_recent_turns=None, keep_recent_tokens=answers_only)
    selection = select(messages, settings=settings, counter=counter)
    assert selection.split == 1  # the pair does not fit, but it is the newest step: it stays
    assert selection.summarized() == []


def test_selection_keeps_the_last_user_message_and_system_messages_out_of_the_summary() -> None:
    messages: list[Message] = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "do the task"},
        *tool_exchange(1),
        {"role": "system", "content": "mid"},
        *tool_exchange(2),
    ]
    settings = make_settings(keep_recent_turns=None, keep_recent_tokens=0)
    selection = select(messages, settings=settings, counter=CharCounter())
    assert selection.split == 2
    assert selection.last_user == 1
    assert selection.summarized() == [2, 3]
    assert selection.kept(len(messages)) == [0, 1, 4, 5, 6]
    assert selection.summarized(1) == []


def test_select_without_user_messages_has_no_turns_to_keep_by_count() -> None:
    messages: list[Message] = [{"role": "assistant", "content": "hello"}]
    selection = select(messages, settings=make_settings(keep_recent_turns=1), counter=CharCounter())
    assert (selection.split, selection.last_user) == (0, None)

from __future__ import annotations

import copy

from compressors.protocols import Message
from compressors.summary.keys import fingerprint, index_key, lock_key, prefix_hashes, summary_key
from compressors.summary.selection import group_blocks
from tests.compressors.test_summary_fakes import conversation, make_settings, tool_exchange


def _hashes(messages: list[Message], **overrides: object) -> list[str]:
    return prefix_hashes(messages, group_blocks(messages), settings=make_settings(**overrides))


def test_prefix_hashes_name_each_boundary_and_ignore_what_comes_later() -> None:
    short = conversation(2)
    longer = [*short, *conversation(3)[5:]]
    assert len(_hashes(short)) == 5
    assert _hashes(longer)[:5] == _hashes(short)
    assert len(set(_hashes(longer))) == len(_hashes(longer))


def test_prefix_hashes_are_canonical_in_key_order_but_exact_in_content() -> None:
    messages = conversation(2)
    reordered = [dict(reversed(list(m.items()))) for m in messages]
    assert _hashes(reordered) == _hashes(messages)
    edited = copy.deepcopy(messages)
    edited[3]["content"] += " "
    assert _hashes(edited)[:3] == _hashes(messages)[:3]
    assert _hashes(edited)[3:] != _hashes(messages)[3:]


def test_prefix_hashes_do_not_depend_on_system_messages() -> None:
    assert _hashes(conversation(2, system="A")) == _hashes(conversation(2, system="B"))


def test_prefix_hashes_treat_a_tool_pair_as_one_boundary() -> None:
    messages: list[Message] = [{"role": "user", "content": "go"}, *tool_exchange(1, calls=2)]
    assert len(_hashes(messages)) == 3


def test_prefix_hashes_change_with_the_settings_that_shape_a_summary() -> None:
    messages = conversation(1)
    base = _hashes(messages)
    assert _hashes(messages, cheap_model="cheap-2") != base
    assert _hashes(messages, summary_max_tokens=600) != base
    assert _hashes(messages, chunk_tokens=100_000, target_tokens=5) == base
    assert fingerprint(make_settings()) != fingerprint(make_settings(cheap_model="other"))


def test_key_names_are_distinct_per_purpose() -> None:
    assert len({summary_key("h"), lock_key("h"), index_key("h")}) == 3

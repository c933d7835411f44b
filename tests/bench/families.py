"""The families of traffic ``bench_families`` replays: scripted, seeded sessions with planted words.

A family is a list of ``Step``s, the requests a client sends in order: the client resends its whole
history every turn and appends scripted answers (never the mock's), so the three runs of the bench send
the same prompts. Each step carries what the measurement needs: the user's instructions present in the
request (they must reach the upstream verbatim) and the facts its latest question or call needs (they
must reach the upstream at all). Planted words are unique codes (``KEY-77120``) that the prose generator
never writes, so finding one is finding the planted sentence.

To add a family: write a function returning its steps and add a ``Family`` to ``FAMILIES``; the runner
and the table take it from there.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from tests.bench.savings import ANSWER_TOKENS, TOOLS, long_chat, text_of, tokens_of
from tests.fixtures.haystack import ProseGenerator
from tests.mock.anthropic import signature_for

Api = Literal["chat", "messages", "responses"]


@dataclass(frozen=True, slots=True)
class Step:
    conversation: str
    """The session the request belongs to (switches are counted per session)."""
    body: dict[str, Any]
    instructions: tuple[str, ...] = ()
    """The user's own instructions present in this request: they must reach the upstream verbatim."""
    needs: tuple[str, ...] = ()
    """Facts the latest question or tool call needs: they must reach the upstream."""
    idle: float = 0.0
    """Seconds the client waits before sending (longer than the scaled-down cache retention)."""
    round: int | None = None
    """Consecutive steps of one round are sent concurrently (sessions side by side); None: alone."""


@dataclass(frozen=True, slots=True)
class Family:
    name: str
    description: str
    api: Api
    model: str
    """The model the client asks for (a bench model of the gateway config: ``bench_families.MODELS``)."""
    build: Callable[[], list[Step]]
    window_limited: bool = False
    """The upstream refuses prompts past the model's window (only through the gateway and the compacting
    client: forwarding unchanged is priced as if the provider had taken them)."""
    idle_retention: float | None = None
    """The cache retention, scaled down (seconds), in the mock and the gateway's provider config."""
    cliff: int = 272_000
    mock_control: dict[str, Any] = field(default_factory=dict)
    """Told the mock (``/_control``) before each of the three runs."""


# --- building blocks ------------------------------------------------------------------------------------


def chat_body(model: str, history: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"model": model, "messages": list(history), "max_completion_tokens": ANSWER_TOKENS, **extra}


def log_of(prose: ProseGenerator, rng: random.Random, tokens: int, planted: str | None = None) -> str:
    """A service log of about ``tokens`` tokens; ``planted`` as one ERROR line two thirds in."""
    lines: list[str] = []
    counted = 0
    while counted < tokens:
        second = len(lines)
        stamp = f"2026-03-01T{second // 3600 % 24:02}:{second // 60 % 60:02}:{second % 60:02}Z"
        level = rng.choice(("INFO", "INFO", "INFO", "DEBUG", "WARN"))
        line = f"{stamp} {level} worker-{rng.randint(1, 12)}: {prose.sentence()}"
        lines.append(line)
        counted += max(1, len(line) // 4)
    if planted is not None:
        lines.insert(len(lines) * 2 // 3, f"2026-03-01T12:00:00Z ERROR worker-7: {planted}")
    return "\n".join(lines)


def fact(rng: random.Random, subject: str) -> str:
    """A planted fact: ``subject`` with a code no prose contains."""
    return f"The {subject} is {rng.choice(('KEY', 'TAG', 'REF', 'PIN'))}-{rng.randint(10_000, 99_999)}."


# --- 1. long chat ------------------------------------------------------------------------------------


def long_chat_steps() -> list[Step]:
    """``bench_savings``'s chat: about 10K tokens a turn to about 420K, nothing planted (the reference)."""
    return [Step("chat", body) for body in long_chat()]


# --- 2. instructions beside pastes ----------------------------------------------------------------


BESIDE = {
    1: ("Also: all timestamps are UTC ISO 8601.", None),
    3: (None, "When you quote a log line, give its timestamp."),
    5: ("Treat WARN lines as errors from now on.", "Reply in British English."),
    8: ("The service is called ledger-sync, never just ledger.", None),
    11: (None, "Ignore the heartbeat lines in every log."),
    14: ("Our availability target is 99.95% per month.", "Keep answers under ten lines."),
}
"""Turn → (the user's words before the paste, after it)."""
LOG_FACTS = {2: "payment key", 6: "rollback ticket", 9: "cluster token", 13: "vault lease"}
LOG_QUESTIONS = {30: 2, 33: 6, 36: 9, 39: 13}
"""Question turn → the turn whose log holds the fact it needs."""


def instructions_beside_pastes() -> list[Step]:
    """A chat of pasted logs (~9,500 tokens each) with the user's instructions before and after them, and
    facts in the logs asked about 20-30 turns later; to about 420K tokens."""
    prose, rng = ProseGenerator(21), random.Random(21)
    history: list[dict[str, Any]] = [{"role": "system", "content": "You are an SRE assistant. " * 40}]
    facts = {turn: fact(rng, subject) for turn, subject in LOG_FACTS.items()}
    said: list[str] = []
    steps = []
    for turn in range(40):
        needs: tuple[str, ...] = ()
        if turn in LOG_QUESTIONS:
            asked = LOG_QUESTIONS[turn]
            text = f"In the log I pasted at turn {asked}, what was the {LOG_FACTS[asked]}?"
            needs = (facts[asked],)
        else:
            before, after = BESIDE.get(turn, (None, None))
            log = log_of(prose, rng, 9_500, facts.get(turn))
            parts = [before or "", "Here is the next log:", "```", log, "```", after or ""]
            text = "\n".join(part for part in parts if part)
            said.extend(words for words in (before, after) if words)
        history.append({"role": "user", "content": text})
        steps.append(Step("pastes", chat_body("gpt-5.4", history), tuple(said), needs))
        history.append({"role": "assistant", "content": text_of(prose, 1_000)})
    return steps


# --- 3. a Codex-style tool loop past the cliff and the window -----------------------------------------


AGENT_TOOLS = [
    *TOOLS,
    {
        "type": "function",
        "function": {
            "name": "run_tests",
            "description": "Run the test suite of a package and return its output.",
            "parameters": {
                "type": "object",
                "properties": {"package": {"type": "string"}},
                "required": ["package"],
            },
        },
    },
]
TASK = "Fix the flaky integration tests of the payments service."
AGENT_RULES = ("Keep the public API unchanged.", "Run the linter before you say you are done.")


def tool_loop_past_window() -> list[Step]:
    """An agent on a model with a 400K window: per turn two rounds of three parallel tool calls (outputs
    of 10-25K tokens, each naming one planted constant), to about 640K tokens. The request after a round
    needs every constant its turn has read so far; every other turn opens with a question about a
    constant read two turns before."""
    prose, rng = ProseGenerator(31), random.Random(31)
    history: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent. Use the tools. " * 30},
        {"role": "user", "content": f"{TASK} {' '.join(AGENT_RULES)}"},
    ]
    read: dict[int, list[str]] = {}
    steps = []
    for turn in range(7):
        needs: tuple[str, ...] = ()
        if turn:
            text = f"Good. Now turn to package group {turn}."
            if turn >= 2 and turn % 2 == 0:
                text += " Before that: what was the first constant you read two turns ago, exactly?"
                needs = (read[turn - 2][0],)
            history.append({"role": "user", "content": text})
        steps.append(Step("agent", chat_body("gpt-5.4-400k", history, tools=AGENT_TOOLS), AGENT_RULES, needs))
        read[turn] = []
        for round_ in range(2):
            calls, outputs = [], []
            for index in range(3):
                call_id = f"call_{turn}_{round_}_{index}"
                path = f"src/payments/g{turn}/m{round_}{index}.py"
                arguments = orjson.dumps({"path": path}).decode()
                calls.append(
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": "read_file", "arguments": arguments},
                    }
                )
                planted = fact(rng, f"retry limit constant of {path}")
                read[turn].append(planted)
                sentences = text_of(prose, rng.randint(10_000, 25_000)).split(". ")
                sentences.insert(len(sentences) // 2, planted.rstrip("."))
                outputs.append({"role": "tool", "tool_call_id": call_id, "content": ". ".join(sentences)})
            history.append({"role": "assistant", "content": None, "tool_calls": calls})
            history.extend(outputs)
            body = chat_body("gpt-5.4-400k", history, tools=AGENT_TOOLS)
            steps.append(Step("agent", body, AGENT_RULES, tuple(read[turn])))
        history.append({"role": "assistant", "content": text_of(prose, 300)})
    return steps


# --- 4. document Q&A --------------------------------------------------------------------------------------


def document_qa() -> list[Step]:
    """A ~500K-token document in the first user message, then 15 questions, each about one clause."""
    prose, rng = ProseGenerator(41), random.Random(41)
    clauses = [fact(rng, f"reference of clause {number}") for number in range(1, 16)]
    parts = []
    for number, clause in enumerate(clauses):
        parts.append(text_of(prose, 33_000))
        parts.append(f"Clause {number + 1}. {clause}")
    document = "\n\n".join(parts)
    history: list[dict[str, Any]] = [
        {"role": "system", "content": "You answer from the document only. " * 20}
    ]
    steps = []
    for number, clause in enumerate(clauses):
        question = f"Question {number + 1}: what is the reference of clause {number + 1}?"
        if number == 0:
            question = f"Here is the contract.\n\n{document}\n\n{question}"
        history.append({"role": "user", "content": question})
        steps.append(Step("document", chat_body("gpt-5.4", history), (), (clause,)))
        history.append({"role": "assistant", "content": text_of(prose, 200)})
    return steps


# --- 5. edits, branches and retries ------------------------------------------------------------------


def edits_and_branches() -> list[Step]:
    """A chat growing 15K tokens a turn to about 330K, with two early instructions in a short message;
    then a retry of the last request, an edit of the last user message (regenerated), and a branch back to
    the turn at about 237K (before the gateway compacted) continued for three turns, the last asking an
    early fact."""
    prose, rng = ProseGenerator(51), random.Random(51)
    rules = ("Cite the section number for every claim.", "Use metric units only.")
    early = fact(rng, "project code")
    history: list[dict[str, Any]] = [{"role": "system", "content": "You are a careful analyst. " * 50}]
    steps = []
    lengths = []
    for turn in range(22):
        text = f"Turn {turn}. " + text_of(prose, 14_000)
        if turn == 1:  # a short message of its own: instructions beside a paste are the pastes family's
            text = f"{rules[0]} {rules[1]} {early}"
        history.append({"role": "user", "content": text})
        said = rules if turn >= 1 else ()
        steps.append(Step("edits", chat_body("gpt-5.4", history), said))
        lengths.append(len(history))
        history.append({"role": "assistant", "content": text_of(prose, 1_000)})
    steps.append(Step("edits", steps[-1].body, rules))  # the retry: the same request again
    edited = [*history[:-2], {"role": "user", "content": "Turn 21, edited. " + text_of(prose, 14_000)}]
    steps.append(Step("edits", chat_body("gpt-5.4", edited), rules))
    cut = next(
        index
        for index, step in zip(lengths, steps, strict=False)
        if tokens_of(step.body["messages"]) >= 237_000
    )
    branch = history[: cut - 1]
    for turn in range(3):
        text = f"Branch turn {turn}. " + text_of(prose, 6_000)
        needs: tuple[str, ...] = ()
        if turn == 2:
            text, needs = "Which project code did I give you at the start?", (early,)
        branch.append({"role": "user", "content": text})
        steps.append(Step("edits", chat_body("gpt-5.4", branch), rules, needs))
        branch.append({"role": "assistant", "content": text_of(prose, 1_000)})
    return steps


# --- 6. idle gaps longer than the cache's retention ------------------------------------------------------


IDLE_RETENTION = 4.0
IDLE_GAP = 6.0
IDLE_BEFORE = (8, 16, 18, 20)


def idle_gaps() -> list[Step]:
    """A chat growing 15K tokens a turn to about 330K, idle longer than the (scaled-down) retention before
    the turns at ~120K, in the band, at the cliff and past it."""
    prose = ProseGenerator(61)
    rule = "Always answer with a one-line summary first."
    history: list[dict[str, Any]] = [{"role": "system", "content": "You are a careful analyst. " * 50}]
    steps = []
    for turn in range(22):
        text = (f"{rule}\n\n" if turn == 0 else "") + f"Turn {turn}. " + text_of(prose, 14_000)
        history.append({"role": "user", "content": text})
        idle = IDLE_GAP if turn in IDLE_BEFORE else 0.0
        steps.append(Step("idle", chat_body("gpt-5.4-idle", history), (rule,), idle=idle))
        history.append({"role": "assistant", "content": text_of(prose, 1_000)})
    return steps


# --- 7. concurrent sessions sharing a system prompt and tools ---------------------------------------------


SESSIONS = 10


def shared_tools() -> list[dict[str, Any]]:
    prose = ProseGenerator(70)
    return [
        {
            "type": "function",
            "function": {
                "name": f"tool_{number}",
                "description": text_of(prose, 120),
                "parameters": {"type": "object", "properties": {"query": {"type": "string"}}},
            },
        }
        for number in range(30)
    ]


def concurrent_sessions() -> list[Step]:
    """Ten sessions side by side on one ~15K-token system prompt and a 30-tool list, each growing 20K
    tokens a turn to about 300K; each has its own instruction and a fact asked about on its last turn."""
    system = {"role": "system", "content": text_of(ProseGenerator(71), 15_000)}
    tools = shared_tools()
    steps = []
    for session in range(SESSIONS):
        prose, rng = ProseGenerator(700 + session), random.Random(700 + session)
        rule = f"Session rule {session}: sign every answer as desk {session}."
        known = fact(rng, f"desk {session} account")
        history: list[dict[str, Any]] = [system]
        for turn in range(14):
            text = f"Turn {turn}. " + text_of(prose, 19_000)
            needs: tuple[str, ...] = ()
            if turn == 0:
                text = f"{rule} {known}\n\n{text}"
            elif turn == 13:
                text, needs = f"What was the desk {session} account I gave you first?", (known,)
            history.append({"role": "user", "content": text})
            body = chat_body("gpt-5.4", history, tools=tools)
            steps.append(Step(f"session-{session}", body, (rule,), needs, round=turn))
            history.append({"role": "assistant", "content": text_of(prose, 800)})
    return sorted(steps, key=lambda step: step.round or 0)


# --- 8. a Messages tool loop with signed thinking ------------------------------------------------------


CLAUDE = "claude-sonnet-4-5"
CLAUDE_COUNT_FACTOR = 1.16
"""Claude's count of a prompt against the o200k estimate: 207K billed for 178K estimated, as observed."""
MESSAGES_TOOLS = [
    {
        "name": "read_file",
        "description": "Read a file of the repository.",
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    }
]


def with_breakpoint(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages with ``cache_control`` on the last block, as Claude Code marks them."""
    *rest, last = messages
    blocks = list(last["content"])
    blocks[-1] = {**blocks[-1], "cache_control": {"type": "ephemeral"}}
    return [*rest, {**last, "content": blocks}]


def messages_tool_loop() -> list[Step]:
    """A Claude Code-style loop on a model with a 200K tier: thinking on, each assistant turn a signed
    thinking block and two tool calls (outputs 10-20K tokens, each naming a planted constant), to about
    330K tokens; the request after each round needs the constants just read."""
    prose, rng = ProseGenerator(81), random.Random(81)
    system = [
        {"type": "text", "text": "You are a coding agent. " * 60, "cache_control": {"type": "ephemeral"}}
    ]
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": f"{TASK} {' '.join(AGENT_RULES)}"}]}
    ]
    steps = []
    for round_ in range(12):
        thought = f"Round {round_}: I should read the next two modules before changing anything."
        uses, results, planted = [], [], []
        for index in range(2):
            use_id = f"toolu_{round_}_{index}"
            path = f"src/payments/m{round_}{index}.py"
            uses.append({"type": "tool_use", "id": use_id, "name": "read_file", "input": {"path": path}})
            known = fact(rng, f"retry limit constant of {path}")
            planted.append(known)
            sentences = text_of(prose, rng.randint(10_000, 20_000)).split(". ")
            sentences.insert(len(sentences) // 2, known.rstrip("."))
            results.append({"type": "tool_result", "tool_use_id": use_id, "content": ". ".join(sentences)})
        thinking = {"type": "thinking", "thinking": thought, "signature": signature_for(CLAUDE, thought)}
        messages.append({"role": "assistant", "content": [thinking, *uses]})
        messages.append({"role": "user", "content": results})
        body = {
            "model": CLAUDE,
            "max_tokens": 4096,
            "thinking": {"type": "enabled", "budget_tokens": 2048},
            "system": system,
            "tools": MESSAGES_TOOLS,
            "messages": with_breakpoint(messages),
        }
        steps.append(Step("claude", body, AGENT_RULES, tuple(planted)))
    return steps


# --- 9. a Codex-style Responses loop ---------------------------------------------------------------------


CODEX_TOOLS = [
    {
        "type": "function",
        "name": "shell",
        "description": "Run a shell command in the workspace and return its output.",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "array", "items": {"type": "string"}}},
            "required": ["command"],
        },
        "strict": False,
    }
]


def user_item(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def codex_loop() -> list[Step]:
    """Codex CLI's shape on the Responses API (``store: false``, encrypted reasoning, a prompt cache key):
    rounds of seven parallel ``shell`` calls (outputs of 10-25K tokens, each naming a planted constant),
    two in the first turn (14 tool outputs, ~250K), three in the second (21 outputs, ~370K: the current turn
    alone is past the cliff), to about 620K tokens. The request after a round needs every constant its turn
    has read; the last turn asks about one read in the first."""
    prose, rng = ProseGenerator(91), random.Random(91)
    items: list[dict[str, Any]] = [user_item(f"{TASK} {' '.join(AGENT_RULES)}")]
    read: list[list[str]] = []
    steps = []

    def body() -> dict[str, Any]:
        return {
            "model": "gpt-5.4",
            "instructions": "You are Codex, a coding agent running in the user's terminal. " * 40,
            "input": list(items),
            "tools": CODEX_TOOLS,
            "tool_choice": "auto",
            "parallel_tool_calls": True,
            "reasoning": {"effort": "medium", "summary": "auto"},
            "store": False,
            "include": ["reasoning.encrypted_content"],
            "prompt_cache_key": "codex-session-1",
            "max_output_tokens": ANSWER_TOKENS,
        }

    for turn in range(3):
        needs: tuple[str, ...] = ()
        if turn:
            text = f"Continue with package group {turn}; read all of it this time."
            if turn == 2:
                text = "Before anything else: what was the first constant you read at the start, exactly?"
                needs = (read[0][0],)
            items.append(user_item(text))
        steps.append(Step("codex", body(), AGENT_RULES, needs))
        if turn == 2:
            break
        read.append([])
        for round_ in range(2 if turn == 0 else 3):
            items.append(
                {"type": "reasoning", "id": f"rs_{turn}_{round_}", "summary": [],
                 "encrypted_content": f"gAAAAB-bench-{turn}-{round_}"}
            )  # fmt: skip
            outputs = []
            for index in range(7):
                call_id = f"call_{turn}_{round_}_{index}"
                path = f"src/payments/g{turn}/m{round_}{index}.py"
                arguments = orjson.dumps({"command": ["cat", path]}).decode()
                items.append(
                    {"type": "function_call", "id": f"fc_{turn}_{round_}_{index}", "call_id": call_id,
                     "name": "shell", "arguments": arguments}
                )  # fmt: skip
                planted = fact(rng, f"retry limit constant of {path}")
                read[turn].append(planted)
                sentences = text_of(prose, rng.randint(10_000, 25_000)).split(". ")
                sentences.insert(len(sentences) // 2, planted.rstrip("."))
                outputs.append(
                    {"type": "function_call_output", "call_id": call_id, "output": ". ".join(sentences)}
                )
            items.extend(outputs)
            steps.append(Step("codex", body(), AGENT_RULES, tuple(read[turn])))
        items.append(
            {"type": "message", "role": "assistant", "id": f"msg_{turn}",
             "content": [{"type": "output_text", "text": text_of(prose, 300), "annotations": []}]}
        )  # fmt: skip
    return steps


FAMILIES: dict[str, Family] = {
    family.name: family
    for family in (
        Family("chat", "long chat, ~10K a turn to ~420K (reference)", "chat", "gpt-5.4", long_chat_steps),
        Family(
            "pastes", "instructions beside 9.5K-token pastes", "chat", "gpt-5.4", instructions_beside_pastes
        ),
        Family(
            "window",
            "tool loop, 3 calls a round, past the cliff and a 400K window",
            "chat",
            "gpt-5.4-400k",
            tool_loop_past_window,
            window_limited=True,
        ),
        Family("document", "500K document, 15 questions", "chat", "gpt-5.4", document_qa),
        Family("edits", "retry, edit and regenerate, branch back", "chat", "gpt-5.4", edits_and_branches),
        Family(
            "idle",
            f"idle {IDLE_GAP:g}s past a {IDLE_RETENTION:g}s retention",
            "chat",
            "gpt-5.4-idle",
            idle_gaps,
            idle_retention=IDLE_RETENTION,
        ),
        Family(
            "sessions",
            f"{SESSIONS} concurrent sessions, shared prompt",
            "chat",
            "gpt-5.4",
            concurrent_sessions,
        ),
        Family(
            "claude",
            "Messages tool loop, signed thinking",
            "messages",
            CLAUDE,
            messages_tool_loop,
            cliff=200_000,
            mock_control={"anthropic_count_factor": CLAUDE_COUNT_FACTOR},
        ),
        Family("codex", "Responses loop, 14-21 tool outputs a turn", "responses", "gpt-5.4", codex_loop),
    )
}

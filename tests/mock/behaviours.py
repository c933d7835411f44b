"""Per-model behaviour of the mock upstream: how one model differs from the default answers.

Set through ``POST /_control`` with ``{"models": {"cand-mini": {...}}}`` (the model as the upstream sees
it, i.e. its ``upstream_model``), forgotten on ``/_reset``; a model not named answers as always. Every
field is optional:

- ``delay_per_1k_prompt_tokens``: seconds waited before answering, per thousand prompt tokens (a model
  that gets slower as the prompt grows; a stream waits before its first event);
- ``answer_words``: a text answer keeps at most this many of its words (a terser model);
- ``tool_above_tokens`` and ``tool_name``: from that many prompt tokens on, a request that offers tools
  gets a call of ``tool_name`` instead of the first offered tool (below it, the same call as any model);
- ``fail_status``: every request to the model fails with this status (after being recorded);
- ``context_window``: a request of more prompt tokens fails with 400 ``context_length_exceeded``, as the
  provider refuses a prompt past the model's window (after being recorded).

Chat completions and Responses, streamed or not, honour them; usage counts the shortened answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class ModelBehaviour:
    delay_per_1k_prompt_tokens: float = 0.0
    answer_words: int | None = None
    tool_above_tokens: int | None = None
    tool_name: str | None = None
    fail_status: int | None = None
    context_window: int | None = None

    @classmethod
    def of(cls, spec: Mapping[str, Any]) -> ModelBehaviour:
        return cls(**spec)

    def too_long(self, prompt_tokens: int) -> bool:
        """The prompt does not fit the model's window."""
        return self.context_window is not None and prompt_tokens > self.context_window

    def delay(self, prompt_tokens: int) -> float:
        return self.delay_per_1k_prompt_tokens * prompt_tokens / 1000

    def words(self, text: str) -> str:
        if self.answer_words is None:
            return text
        return " ".join(text.split()[: self.answer_words])

    def tool(self, prompt_tokens: int) -> str | None:
        """The tool this model calls instead of the first offered one (None: the first offered one)."""
        above = self.tool_above_tokens
        if self.tool_name is None or above is None or prompt_tokens < above:
            return None
        return self.tool_name

    def chat(
        self, content: str | None, tool_calls: list[dict[str, Any]] | None, prompt_tokens: int
    ) -> tuple[str | None, list[dict[str, Any]] | None]:
        """A chat completion's (content, tool_calls) as this model gives them."""
        name = self.tool(prompt_tokens)
        if tool_calls and name is not None:
            tool_calls = [{**call, "function": {**call["function"], "name": name}} for call in tool_calls]
        return (self.words(content) if content else content), tool_calls

    def response(self, response: dict[str, Any], prompt_tokens: int) -> dict[str, Any]:
        """A Responses answer (``tests.mock.responses.responses_answer``) as this model gives it."""
        name = self.tool(prompt_tokens)
        output: list[dict[str, Any]] = []
        for item in response["output"]:
            if item["type"] == "function_call" and name is not None:
                item = {**item, "name": name}
            elif item["type"] == "message":
                parts = [{**part, "text": self.words(part["text"])} for part in item["content"]]
                item = {**item, "content": parts}
            output.append(item)
        messages = [item for item in output if item["type"] == "message"]
        text = "".join(part["text"] for item in messages for part in item["content"])
        usage = response["usage"]
        reasoning = usage["output_tokens_details"]["reasoning_tokens"]
        produced = (max(1, len(text) // 4) if text else 12) + reasoning
        usage = {**usage, "output_tokens": produced, "total_tokens": usage["input_tokens"] + produced}
        return {**response, "output": output, "usage": usage}

"""A stand-in for the providers, built into the gateway, for trying it without a provider key.

``gateway serve --mock-upstream`` (``./bin/run --mock-upstream``) starts it on a free local port before the
config is read, and points the ``${OPENAI_BASE_URL}`` and ``${ANTHROPIC_BASE_URL}`` of the config at it
(with placeholder provider keys), so the example config's providers call it and nothing leaves the
machine. It answers the OpenAI and Anthropic APIs the gateway forwards to (chat completions, Responses,
embeddings, Messages, the token counting calls, the models list) with short canned answers, in the real
shapes, with usage, streamed when asked: enough for every request the gateway makes to be counted, priced
and recorded as with a real provider.

- ``answers``: what it says (the text, the usage, the bodies and the streamed events of each API);
- ``app``: the routes, a small Starlette app;
- ``server``: running it beside the gateway, and what the start prints (the tenant key, a request to
  paste).

It is not the test suite's mock (``tests/mock``), which simulates a provider's prompt cache, failures and
agents for the tests: this one is small, deterministic, and meant for people.
"""

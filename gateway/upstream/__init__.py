"""Calling providers.

``calls``: one pooled client per provider, retries before the first byte, then fallbacks; ``failures``:
why an attempt failed, in words an operator can act on; ``headers``: what a call carries; ``sse``:
server-sent events read as they arrive. The calls the gateway makes for a request besides its own:
``side_calls``, ``provider_count`` (the provider's own count of a prompt) and ``summary_completer``
(the cheap model over Anthropic's Messages API).
"""

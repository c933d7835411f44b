"""What the gateway knows of a conversation across turns, for the provider's prompt cache.

Read in this order: ``fingerprint`` (prefix fingerprints at message boundaries, and the conversation's
name), ``state`` (what the client and the gateway last sent, and when), ``counterfactual`` (the cached
tokens forwarding a request unchanged would plausibly have had), ``store`` (Redis), ``trace`` and
``recorder`` (a request's part: what it leaves behind after its answer).
"""

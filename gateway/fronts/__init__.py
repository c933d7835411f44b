"""The fronts: one adapter per API over the same core, each turning its API's shape into the core's
request view and back, with its own flow over the pipeline.

``chat`` (``POST /v1/chat/completions``), ``forwarded`` (embeddings, and the passthrough paths the config
grants), ``responses/`` (OpenAI's Responses API) and ``messages/`` (Anthropic's Messages API). Their HTTP
handlers are the edge's (``gateway.edge``).
"""

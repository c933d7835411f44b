"""Exact, offline token counting the way OpenAI bills a request.

Modules, one concept each:

- ``vocab``      tiktoken ``Encoding``s built from the vocabulary files of the ``bpe-openai`` wheel,
                 verified against the sha256 tiktoken itself expects
- ``encodings``  model name -> encoding name (config first, then name prefixes, then the default)
- ``images``     image token rules (512-px tiles, 32-px patches) and the rule of each model family
- ``imagesize``  width and height from the header bytes of a PNG, JPEG, GIF or WebP data URL
- ``tools``      tokens of ``tools`` / ``functions`` definitions
- ``profile``    what counting needs to know about one model (encoding, image rule, tool overheads)
- ``messages``   tokens of one chat message (overheads, content parts, tool calls, images)
- ``cache``      the bounded LRU of per-message counts
- ``bound``      a sound upper bound of the tokens of a request from its size in bytes
- ``counter``    ``TokenCounter`` and ``TokenCount``: the API the gateway calls
- ``adapter``    ``ModelTokens``: one model's view of the counter, for the compressors' protocol
- ``buckets``    context-length buckets (token ranges) and their labels, for the sampler, the
                 experiments and the ledger's FOCUS export

The package root imports nothing. The ``counting:`` section of the config is
``gateway.config.schema.counting``.
"""

"""Pure transformations of a request's messages: summary compression and chunked retrieval.

Nothing here does I/O of its own: the gateway supplies token counting, cheap-model completion,
embeddings and caching through the protocols in ``compressors.protocols``.
"""

"""Passive behaviour sampling, the behaviour map and the needle probe kit.

Modules, one concept each:

- ``decide``      which requests are sampled (blake2b of the request id), ``is_probe``, ``trusted_probe``
- ``signals``     ``Signal``: one sampled request's behaviour, built from a ``RequestRecord``; no text
- ``logprobs``    mean and minimum token logprob of a completion or a stream
- ``observer``    ``Sampler``: the pipeline observer (decide, build, hand over; never waits)
- ``keys``        the Redis key layout (``gw:samples:{model}``, ``gw:probes:{model}``)
- ``store``       ``SampleWriter``: bounded queue, background pipelined ``XADD MAXLEN ~``
- ``percentiles`` p10 / p50 / p90 by linear interpolation
- ``since``       the start of a report's window (``7d``, ``24h``, an ISO date)
- ``probes/``     the active probe kit: needles in haystacks made locally, sent through the gateway,
                  scored and stored, and their recall
- ``report/``     the behaviour map: samples and probe results read back, per bucket, as JSON, text
                  or HTML (``GET /admin/probes/report``)

Context-length buckets are ``gateway.tokens.buckets``.

The package root imports nothing. The ``sampling:`` section of the config is
``gateway.config.schema.sampling``.
"""

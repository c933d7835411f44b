"""Passive behaviour sampling, the behaviour map and the needle probe kit.

Modules, one concept each:

- ``decide``      which requests are sampled (blake2b of the request id), ``is_probe``, ``trusted_probe``
- ``signals``     ``Signal``: one sampled request's behaviour, built from a ``RequestRecord``; no text
- ``logprobs``    mean and minimum token logprob of a completion or a stream
- ``observer``    ``Sampler``: the pipeline observer (decide, build, hand over; never waits)
- ``keys``        the Redis key layout (``gw:samples:{model}``, ``gw:probes:{model}``)
- ``store``       ``SampleWriter``: bounded queue, background pipelined ``XADD MAXLEN ~``
- ``reader``      ``SampleReader``: samples and probe results back from Redis
- ``buckets``     context-length buckets and token-count labels
- ``percentiles`` p10 / p50 / p90 by linear interpolation
- ``recall``      probe recall tallies and the length x depth grid
- ``boundary``    the effective-context boundary: the first bucket where a signal degrades, and the
                  first probed length whose recall falls
- ``report``      ``build_report``: the behaviour map per bucket (by the tokens the model received), with
                  the size received, the action mix and the worst-experience cell
- ``document``    the report as JSON data
- ``verdict``     why there is no boundary: too few samples to look, none found, an upstream not answering
- ``table``       the report as terminal text
- ``shading``     the heatmap's colour scale: each row against the model's own range
- ``rows``        the heatmap's rows: value, count, display, direction and trust of each signal percentile
- ``html``        the report as one self-contained HTML file
- ``since``       the start of a report's window (``7d``, ``24h``, an ISO date)
- ``routes``      ``GET /admin/probes/report``
- ``needle``      the needle fact, its scoring, ``ProbeResult``
- ``haystack``    filler text made locally, counted in tokens, with the needle at a depth
- ``probe``       the active probe kit: send probes through the gateway, score, store

The package root imports nothing. The ``sampling:`` section of the config is
``gateway.config.schema.sampling``.
"""

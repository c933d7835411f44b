"""The exact response cache: a tenant that opts in (``tenants.<name>.response_cache``) has a repeated
request answered from the answer the same request got before, without an upstream call, at no cost.

- ``key``: which requests are the same (the tenant, the API, the model and the body made canonical);
- ``entry`` and ``store``: what is kept in Redis, and how a tenant's share of it is bounded;
- ``shape`` and one module per API (``chat``, ``responses``, ``messages``): when an answer is complete
  enough to keep, how a stream is assembled into the whole answer, and how a whole answer is streamed;
- ``flow``: the steps the fronts call (look up, answer a hit, keep a miss's answer).

A tenant without a cache costs a request one membership test of its name in ``Runtime.response_caches``
(a dict, empty when no tenant has a cache): no hashing, no Redis.
"""

"""Rate limits: requests, tokens and dollars per minute per tenant, per key, and per model within them,
exact over every worker and instance. ``RateLimiter.admit()`` before forwarding (one Lua script over all the
request's counters, ``gateway.ratelimits.script``), ``RateSettler`` once the request is over (what it held
and did not use given back). Which limits apply is ``gateway.config.rate_limits.limits_for``; the step in
the request flow is ``gateway.core.rate_limits``.
"""

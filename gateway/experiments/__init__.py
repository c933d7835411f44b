"""Experiments: try a candidate model on live traffic before switching to it.

``shadow`` mirrors a sample of matching requests to the candidate after the primary's answer is handed
over and compares the two answers; ``split`` routes a share of matching conversations to the candidate,
sticky per conversation. Both are observers and one routing step; neither is on a request's path unless
it matches.

Their report (read back, compared, shown as text, HTML or JSON) is in ``report/``; which experiments watch
a request is ``gateway.config.experiments``, their config section ``gateway.config.schema.experiments``.
"""

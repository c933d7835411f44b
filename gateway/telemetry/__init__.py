"""OpenTelemetry traces of requests: a server span per request, a client span per upstream attempt.

Off by default (``gateway.telemetry.switch``). When on, the request path only notes what the spans need on
the record (the client's ``traceparent``, its sampling parameters, each attempt's times); the spans are made
afterwards, by an observer, with those exact times, and exported in the background over OTLP/HTTP. When
off, nothing here but ``switch`` and ``context`` is imported, nor the SDK's tracing nor the exporter (FastAPI
imports the OpenTelemetry API by itself; the gateway never sets its global provider, so FastAPI's own
telemetry stays off).
"""

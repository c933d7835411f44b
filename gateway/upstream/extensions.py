"""The request extensions the gateway's upstream transport reads (``httpx.Request.extensions``)."""

WHOLE_BODY = "gateway.whole_body"
"""True: read the whole answer before returning it (a call that is not a stream). Transports that do not
know it ignore it."""

"""The gateway's error hierarchy; every class renders as an OpenAI-style error object.

GatewayError (500, api_error)
├── InvalidRequest (400, invalid_request_error)
│   ├── MalformedJSON            code=invalid_json
│   └── ContextLengthExceeded    code=context_length_exceeded
├── AuthenticationFailed (401, authentication_error)   code=invalid_api_key
├── PermissionDenied (403, permission_error)
├── NotFound (404, invalid_request_error)
│   ├── ModelNotFound            code=model_not_found
│   └── RouteNotFound            code=unknown_url
├── PayloadTooLarge (413, invalid_request_error)       code=request_too_large
├── BudgetExceeded (429, insufficient_quota)          code=budget_exceeded
├── RateLimited (429, requests)                       code=rate_limit_exceeded, with retry-after
├── ClientClosedRequest (499, client_error)           code=client_disconnected (never sent: nobody listens)
├── ServiceUnavailable (503, service_unavailable)
└── UpstreamError (502, upstream_error)
    ├── UpstreamRejected        a non-retryable upstream answer, passed through as is
    ├── ProviderKeyRefused      code=provider_key_refused: a provider's 401 to the gateway's own key
    ├── UpstreamInvalidAnswer   code=upstream_invalid_response: a success that is not the JSON it must be
    └── UpstreamExhausted       every attempt and fallback failed; causes attached
"""

from __future__ import annotations

from collections.abc import Sequence

import orjson

from gateway.base.headroom import Headroom


class GatewayError(Exception):
    status_code: int = 500
    error_type: str = "api_error"
    default_code: str | None = None

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.code = code if code is not None else self.default_code

    def body(self) -> bytes:
        return orjson.dumps(
            {
                "error": {
                    "message": self.message,
                    "type": self.error_type,
                    "param": self.param,
                    "code": self.code,
                }
            }
        )

    def headers(self) -> dict[str, str]:
        return {}


class InvalidRequest(GatewayError):
    status_code = 400
    error_type = "invalid_request_error"


class MalformedJSON(InvalidRequest):
    default_code = "invalid_json"


class ContextLengthExceeded(InvalidRequest):
    default_code = "context_length_exceeded"


class AuthenticationFailed(GatewayError):
    status_code = 401
    error_type = "authentication_error"
    default_code = "invalid_api_key"


class PermissionDenied(GatewayError):
    status_code = 403
    error_type = "permission_error"


class NotFound(GatewayError):
    status_code = 404
    error_type = "invalid_request_error"


class ModelNotFound(NotFound):
    default_code = "model_not_found"


class RouteNotFound(NotFound):
    default_code = "unknown_url"


class PayloadTooLarge(GatewayError):
    status_code = 413
    error_type = "invalid_request_error"
    default_code = "request_too_large"


class BudgetExceeded(GatewayError):
    status_code = 429
    error_type = "insufficient_quota"
    default_code = "budget_exceeded"
    room_nanos: int | None = None
    """What the refused period's limit leaves above what is spent already, holds of requests in flight
    aside (spend only grows within a period: no hold above this can pass before it ends); None: unknown."""


class RateLimited(GatewayError):
    """Too many calls of a kind in the current window; ``retry_after``: seconds until it ends (and
    ``retry_after_ms`` more precisely, which the official SDKs read first); ``retry``: False when waiting
    cannot help (``x-should-retry: false``, which the SDKs obey); ``headroom``: what the caller's rate
    limits had left (``gateway.ratelimits``), shown in the front's own headers."""

    status_code = 429
    error_type = "requests"
    default_code = "rate_limit_exceeded"
    headroom: Headroom | None = None

    def __init__(
        self, message: str, *, retry_after: int, retry_after_ms: int | None = None, retry: bool = True
    ) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.retry_after_ms = retry_after_ms
        self.retry = retry

    def headers(self) -> dict[str, str]:
        out = {"retry-after": str(self.retry_after)}
        if self.retry_after_ms is not None:
            out["retry-after-ms"] = str(self.retry_after_ms)
        if not self.retry:
            out["x-should-retry"] = "false"
        return out


class ClientClosedRequest(GatewayError):
    """The client went away before the gateway had its request: counted as the client's doing (499, as
    nginx logs it), not as a failure of the gateway."""

    status_code = 499
    error_type = "client_error"
    default_code = "client_disconnected"


class ServiceUnavailable(GatewayError):
    status_code = 503
    error_type = "service_unavailable"


class UpstreamError(GatewayError):
    status_code = 502
    error_type = "upstream_error"
    attempts = 0
    """The upstream attempts made before this error (set where they were counted)."""


class UpstreamRejected(UpstreamError):
    """A non-retryable upstream answer; the client receives the upstream's status and body unchanged."""

    def __init__(self, status_code: int, body: bytes, content_type: str | None) -> None:
        super().__init__(f"upstream answered {status_code}")
        self.status_code = status_code
        self.raw_body = body
        self.content_type = content_type or "application/json"

    def body(self) -> bytes:
        return self.raw_body


class ProviderKeyRefused(UpstreamError):
    """The provider answered 401 to the gateway's key for it (wrong, revoked or not configured).

    Not passed through: the client's key was accepted, and a 401 would make its SDK say that *its* key
    was refused (``openai.AuthenticationError``). This is the gateway's configuration failing, answered as
    a bad gateway (502), the way OpenRouter answers a provider's failure; the provider's body stays out of
    the answer (OpenAI's echoes part of the key it refused)."""

    default_code = "provider_key_refused"


class UpstreamInvalidAnswer(UpstreamError):
    """The upstream said success, but its body is not the JSON object the call must return.
    ``timed_out``: the attempts before it that timed out (``gateway.upstream.calls.TimedOut``)."""

    default_code = "upstream_invalid_response"

    def __init__(self, message: str, *, timed_out: Sequence[object] = ()) -> None:
        super().__init__(message)
        self.timed_out = tuple(timed_out)


class UpstreamExhausted(UpstreamError):
    """Every attempt on every candidate failed. The last upstream answer, if any, is passed through.
    ``timed_out``: the attempts among them that timed out (``gateway.upstream.calls.TimedOut``); ``attempts``:
    how many were made; ``failures``: why each failed (``gateway.upstream.failures.AttemptFailure``)."""

    def __init__(
        self,
        message: str,
        causes: Sequence[BaseException],
        last: UpstreamRejected | None,
        *,
        timed_out: Sequence[object] = (),
        attempts: int = 0,
        failures: Sequence[object] = (),
    ) -> None:
        super().__init__(message, code="upstream_unavailable")
        self.causes = tuple(causes)
        self.last = last
        self.timed_out = tuple(timed_out)
        self.attempts = attempts
        self.failures = tuple(failures)
        if last is not None:
            self.status_code = last.status_code

    def body(self) -> bytes:
        return self.last.raw_body if self.last is not None else super().body()

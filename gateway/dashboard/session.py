"""The dashboard's login: the admin key, typed once into a form, becomes a cookie that is not the key.

The cookie is ``<expiry>.<HMAC-SHA256 of the expiry, keyed by the admin key>``: every worker and every
instance that knows the admin key accepts it without shared state, it expires on its own, and changing the
admin key ends every session. Keys and signatures are compared in constant time.
"""

from __future__ import annotations

import hashlib
import hmac

COOKIE = "gateway_dashboard"
SESSION_SECONDS = 12 * 3600
_CONTEXT = b"gateway dashboard session v1\x00"


def _signature(admin_key: str, expires: int) -> str:
    message = _CONTEXT + str(expires).encode()
    return hmac.new(admin_key.encode(), message, hashlib.sha256).hexdigest()


def issue(admin_key: str, *, now: float) -> str:
    """A session cookie's value, valid for ``SESSION_SECONDS`` from ``now``."""
    expires = int(now) + SESSION_SECONDS
    return f"{expires}.{_signature(admin_key, expires)}"


def valid(admin_key: str, value: str | None, *, now: float) -> bool:
    """The cookie was issued with this admin key and has not expired."""
    if not value:
        return False
    expires_text, _, signature = value.partition(".")
    if not expires_text.isdigit() or len(expires_text) > 12:
        return False
    expires = int(expires_text)
    expected = _signature(admin_key, expires)
    return hmac.compare_digest(signature.encode(), expected.encode()) and now < expires


def key_matches(admin_key: str, presented: str) -> bool:
    return hmac.compare_digest(presented.encode(), admin_key.encode())

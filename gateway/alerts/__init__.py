"""Budget alerts and policy-fit alerts: read off the request path, claimed once in Redis, sent to a
webhook."""

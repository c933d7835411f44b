"""The HTTP edge: the app, and the handlers that wire each front to the core.

``app`` builds the application, ``lifespan`` opens and closes what it holds (``state``); ``routes`` (chat,
embeddings, passthrough, models, health, the error handlers), ``responses_routes``, ``messages_routes``,
``metrics_route`` and ``admin`` are the handlers; ``server_protocol`` is the HTTP/1.1 protocol
``gateway serve`` speaks, ``paths`` the path guard, ``readiness`` what ``/readyz`` answers, ``logs`` the
structured logs and the request log line.
"""

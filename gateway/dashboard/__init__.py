"""The cost dashboard (``GET /admin/dashboard``): finance's view of the ledger in a browser.

Read in this order: ``session`` (the login cookie, derived from the admin key), ``periods`` (today, 7 days,
this month, last month, custom), ``figures`` (what the page shows, read through the ledger's reader and
``gateway.ledger.summary``, so it equals ``gateway costs summary``), ``view`` (what a page shows),
``palette`` and ``svg`` (charts drawn on the server), ``text``, ``style``, ``sections`` and ``page`` (the
HTML) and ``routes``.
"""

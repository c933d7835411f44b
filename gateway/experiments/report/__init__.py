"""An experiment's report: its pairs and counters read back (``reading``, ``records``), compared per
context bucket (``comparison``, ``projection``, ``verdict``), and shown as terminal text (``table``),
HTML (``html``, ``rows``, ``figures``) or JSON, on ``GET /admin/experiments`` (``routes``) and by
``gateway experiments report``.
"""

"""The behaviour map of a model: samples and probe results read back (``reader``), per context bucket
(``report``, ``boundary``, ``verdict``), shown as JSON (``document``), terminal text (``table``) or HTML
(``html``, ``rows``, ``shading``), on ``GET /admin/probes/report`` (``routes``) and by
``gateway probes report``.
"""

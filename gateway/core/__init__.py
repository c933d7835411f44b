"""The proxy core: the request steps every front's flow calls, in the order of a request.

``body`` (read and parse once), ``planning`` (count, decide, run the transforms; the ``Front`` protocol
each front implements), ``admission`` (the budget hold), ``transforms`` (the compressors' seams, with
their Redis ``cache``), ``shared_objects`` (references to the provider's account-wide objects),
``replies`` and ``streaming`` (the answer, whole or relayed), ``usage_report``, ``metering`` (what a
request cost, as cost events), ``attempts``, ``request_ids``, ``count_limit``. The core knows no front:
each front passes its adapter in.
"""

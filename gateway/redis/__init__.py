"""Redis plumbing: how the gateway talks to Redis, not what it keeps there (that is each concern's:
``ledger/``, ``sampling/``, ``conversations/``...).

``connect`` opens the process's client from a URL, ``server`` runs an embedded Redis when no URL is given,
``version`` and ``mode`` check the server it found, ``replication`` confirms writes on a replica, and
``pipelined`` sends pipelines whose every reply is checked.
"""

"""Configuration: the YAML schema (``schema/``), and what the process makes of it.

``loading`` reads a file (``${VAR}`` interpolation, errors with file and line); ``runtime`` is what one
loaded config compiles to (routes, the policy engine, the key ring of ``auth``, the ``passthrough`` rules,
the ``experiments`` index), swapped atomically by ``reload``; ``startup`` says what the gateway will call
and who can reach it; ``settings`` are the process settings from the environment (``GATEWAY_*``).
"""

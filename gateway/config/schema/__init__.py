"""The YAML config schema (pydantic, at the edge): ``root`` (``GatewayConfig``:
providers, models, tenants, and the sections), one module per section (``limits``, ``passthrough``,
``counting``, ``ledger`` with the budgets, ``sampling``, ``experiments``), and ``base``, what every
section shares (unknown keys are errors, values never change).
"""

"""What a request costs: the prices of a model with their tiers (``pricing``), applied to the usage
an answer reports, read from OpenAI's shapes (``usage``) or Anthropic's (``anthropic_usage``).

Amounts are integer nano-dollars (``gateway.base.money``, which sits lower: the config schema reads
budgets with it).
"""

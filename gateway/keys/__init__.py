"""API keys managed through the admin API and the CLI, kept hashed in Redis beside the config's keys."""

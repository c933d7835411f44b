"""What the mock's cheap model answers the gateway's summary calls, on either API: the three sections, and
none of the conversation's facts (so that a benchmark measures what the gateway keeps, not the model)."""

SUMMARY = (
    "## User goal\nFinish the analysis the user asked for.\n"
    "## Confirmed conclusions\n- The earlier turns were read.\n"
    "## Open todos\n- Answer the latest question."
)

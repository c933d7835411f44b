"""Reading recorded traffic as a whole: the total-cost view per model and context length, and replay under
a candidate config. Both read the ledger through its reader, a page at a time."""

"""What the workflow shows a reader: rendered privacy cards, the budget ledger and
report tables, built from the workflow's artifacts (the content itself comes from
``dpaudit.dp`` and the metric families)."""

"""Canary audits: ε lower bounds and estimates from planted canaries (family ``canary``)."""

"""Canary audits: ε lower bounds from many releases on a dataset and on a chosen neighbour."""

"""The project's contract: every name that more than one layer reads, declared once.

Submodules (import them directly; nothing is re-exported here):

* ``dpaudit.contract.metrics``: the metric vocabulary. Every (family, metric) with
  its meaning, unit, kind (guarantee, bound, estimate, measurement, diagnostic) and
  parameter columns; the one row writer that refuses an undeclared metric.
* ``dpaudit.contract.mechanisms``: the training mechanisms and their display names.
* ``dpaudit.contract.delta``: the δ policy (one check, one range, one ``auto``).
* ``dpaudit.contract.paths``: every artifact path pattern the rules and jobs use.
"""

"""dpaudit: measure how private trained machine-learning models are."""

__version__ = "0.1.0"

"""Figures. Every module selects matplotlib's Agg backend: jobs have no display."""

import matplotlib

matplotlib.use("Agg")

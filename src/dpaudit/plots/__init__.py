"""Figures. Every module selects matplotlib's Agg backend: jobs have no display.

PDFs embed TrueType (Type 42) fonts, not Type 3: many venues reject Type 3.
Set once here, before any figure module draws.
"""

import matplotlib

matplotlib.use("Agg")
matplotlib.rcParams["pdf.fonttype"] = 42
matplotlib.rcParams["ps.fonttype"] = 42

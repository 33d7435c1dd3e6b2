"""dpaudit.plots"""

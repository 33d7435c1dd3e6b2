"""dpaudit.training"""

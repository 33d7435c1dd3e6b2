"""dpaudit.data"""

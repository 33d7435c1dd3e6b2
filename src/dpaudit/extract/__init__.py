"""dpaudit.extract"""

"""dpaudit.metrics"""

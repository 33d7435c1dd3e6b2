"""dpaudit.dp"""

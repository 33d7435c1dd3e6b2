"""The datasets: built-in sources, downloads with checksums, the user's table, and the split every metric reads."""

"""The translation cache: its key and entries, the memory, SQLite and Redis layers, and the whole."""

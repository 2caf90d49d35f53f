"""The translation memories on the replica: their lookups, the core with them in front, each request's use."""

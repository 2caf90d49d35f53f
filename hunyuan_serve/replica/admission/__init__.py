"""Admission: what the replica takes in, runs, queues or refuses, and when each engine call runs."""

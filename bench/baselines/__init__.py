"""Baselines `make bench` compares the stack against."""

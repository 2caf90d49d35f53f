"""`make bench`: k6 scenarios, baselines, the driver and its report (see bench/README.md)."""

"""Planning, running and watching replica processes: plans, ports, procs, probes, the health machine."""

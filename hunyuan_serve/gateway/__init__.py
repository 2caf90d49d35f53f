"""The multi-host front: one Nginx over every ready replica of every host, fed by discovery and probes."""

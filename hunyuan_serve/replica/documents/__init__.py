"""Document jobs: what a job is (jobs), its file read and written (files), the worker that runs it."""

"""Code the test directories share (imported as `tests.support...`; the repository root is on sys.path)."""

"""Durable state the replicas share: per-key glossaries and usage, and the document-job queue."""

"""How many requests a client keeps in flight: fixed, or sized from what the service says it batches."""

from __future__ import annotations

import math

from hunyuan_serve.client.settings import ClientSettings

# Sent by the service's Nginx with each proxied answer (edge/capacity.py edge_bulk_texts).
BULK_TEXTS_HEADER = "X-Hunyuan-Bulk-Texts"


def parse_bulk_texts(value: str | None) -> int | None:
    """The header's count of texts, or None when absent or not a positive whole number."""
    if value is None or not value.strip().isdigit():
        return None
    count = int(value)
    return count or None


def requests_in_flight(settings: ClientSettings, bulk_texts: int | None) -> int:
    """settings.concurrency when set. Else, for bulk work, enough batches to fill what the service's
    ready engines batch for bulk (bulk_texts), within 1..max_connections (more would wait for a pooled
    connection); start_concurrency until the service has said, and always for interactive work."""
    if settings.concurrency is not None:
        return settings.concurrency
    if bulk_texts is None or settings.priority != "bulk":
        return settings.start_concurrency
    return max(1, min(settings.max_connections, math.ceil(bulk_texts / settings.batch_size)))


def most_in_flight(settings: ClientSettings) -> int:
    """The widest requests_in_flight can ever make it: the workers a batch run starts up front."""
    return settings.concurrency or max(settings.max_connections, settings.start_concurrency)

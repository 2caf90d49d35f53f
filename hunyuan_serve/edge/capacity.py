"""How much Nginx lets through to a replica and a pool: the per-replica cap and the bulk shares."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from hunyuan_serve.config import ServeConfig
from hunyuan_serve.edge.routing import UpstreamServer

if TYPE_CHECKING:  # layout builds its upstreams from this module's caps
    from hunyuan_serve.edge.layout import Upstream


def edge_max_conns(cfg: ServeConfig) -> int:
    """Nginx's cap per replica (0: none). By default what the replica takes: the requests it runs and
    those it lets wait (max_in_flight + max_queued), so a burst waits in the replicas, least_conn
    spreading it by queue depth, and Nginx answers its own 503 only once every replica is full.
    Without a replica queue (max_queued 0), what its engine batches at once: max_num_seqs, on CPU at
    most nginx.cpu_max_conns, never more than max_in_flight."""
    if cfg.nginx.max_conns is not None:
        return cfg.nginx.max_conns
    if cfg.replica.max_queued:
        return cfg.replica.max_in_flight + cfg.replica.max_queued
    return min(engine_batch(cfg), cfg.replica.max_in_flight)


def replica_holds(cfg: ServeConfig, max_conns: int) -> int:
    """Requests Nginx may keep open to one replica at once: its cap (max_conns, edge_max_conns), or with
    none (0) what the replica's own admission takes before it refuses (max_in_flight + max_queued)."""
    return max_conns or cfg.replica.max_in_flight + cfg.replica.max_queued


def worker_connections(least: int, upstreams: Iterable[Upstream]) -> int:
    """Connections an Nginx worker may hold: at least `least` (nginx.worker_connections), and enough
    for every replica full (Upstream.holds, replica_holds), each of those requests a client's connection
    and one to its replica, with `least` more for the refusals and the rest (the kernel may hand one
    worker every connection). With 2,304 a replica (max_in_flight 256 + max_queued 2048) two replicas
    need 9,216 for their requests alone: 4096 dropped connections under the overload question
    ("worker_connections are not enough")."""
    return least + 2 * sum(u.holds * len(u.servers) for u in upstreams)


def engine_batch(cfg: ServeConfig) -> int:
    """Sequences worth sending one replica's engine at once: max_num_seqs, on CPU at most
    nginx.cpu_max_conns (a CPU engine's throughput stops growing long before, its steps only lengthen)."""
    batch = cfg.engine.max_num_seqs
    return min(batch, cfg.nginx.cpu_max_conns) if cfg.engine.device == "cpu" else batch


def edge_bulk_conns(cfg: ServeConfig, servers: Sequence[UpstreamServer], max_conns: int) -> int:
    """Bulk requests Nginx lets into one pool at once: of its ready replicas' max_conns, what the
    replica's own admission gives bulk (ReplicaConfig.bulk_slots: all but interactive_reserve), so
    that when the pool fills up Nginx refuses bulk first and interactive work still gets a place.
    0 (no cap) with nginx.bulk_cap off or max_conns 0 (Nginx does not cap the pool at all then).
    No ready replica: the cap of one (Nginx needs a number; every request gets the 503 anyway)."""
    if not cfg.nginx.bulk_cap or not max_conns:
        return 0
    ready = max(1, sum(not s.down for s in servers))
    return cfg.replica.bulk_slots(ready * max_conns)


def edge_bulk_texts(cfg: ServeConfig, servers: Sequence[UpstreamServer]) -> int:
    """Texts a pool's ready engines batch at once for bulk work: the bulk share (ReplicaConfig.bulk_slots)
    of their engine_batch. Nginx sends it as X-Hunyuan-Bulk-Texts with each proxied answer, so a client
    sizes its work in flight from it (a fixed 8 x 16 cannot fill GPU engines that batch 256 each). On
    CPU the bench measured the cost of more: 384 texts in flight on two replicas made a person's
    request 9.7x slower than idle for 13% more bulk texts/s (`python -m bench people-first`).
    0 with no ready replica (no header then)."""
    ready = sum(not s.down for s in servers)
    return cfg.replica.bulk_slots(ready * engine_batch(cfg)) if ready else 0

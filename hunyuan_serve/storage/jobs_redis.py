"""The document-job queue in Redis, for hosts that share it: each change one Lua script."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from hunyuan_serve.cache.redis_layer import RedisSettings, redacted, redis_errors
from hunyuan_serve.storage.backend import StoreUnavailable
from hunyuan_serve.storage.jobs import JOB_FIELDS, Job

T = TypeVar("T")
# The job fields that are numbers, to read back from the hash's strings.
_JOB_NUMBERS = {"created", "updated", "started", "lease_until"}
_JOB_COUNTS = {"segments_total", "segments_done", "segments_cached", "billed_characters", "attempts"}
# Each change is one script, which Redis runs alone: a claim and a lease check are as atomic as the
# SQLite statements. KEYS[1]: the open jobs (a sorted set by creation), KEYS[2]: every job by last
# change; ARGV[1]: the job key prefix; the clock comes in ARGV (the unit tests' fake one too).
_CLAIM = """
local now, holder, lease, max = tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
for _, id in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  local key = ARGV[1] .. id
  local state = redis.call('HGET', key, 'state')
  local until_ = tonumber(redis.call('HGET', key, 'lease_until') or '0')
  local attempts = tonumber(redis.call('HGET', key, 'attempts') or '0')
  if not state then
    redis.call('ZREM', KEYS[1], id)
  elseif state == 'translating' and until_ < now and attempts >= max then
    redis.call('HSET', key, 'state', 'error', 'updated', now, 'error', ARGV[6])
    redis.call('HDEL', key, 'lease_owner')
    redis.call('ZREM', KEYS[1], id)
    redis.call('ZADD', KEYS[2], now, id)
  elseif state == 'queued' or (state == 'translating' and until_ < now) then
    redis.call('HSET', key, 'state', 'translating', 'lease_owner', holder, 'lease_until', now + lease,
      'updated', now, 'attempts', attempts + 1)
    redis.call('HSETNX', key, 'started', now)
    redis.call('ZADD', KEYS[2], now, id)
    return id
  end
end
return false
"""
# ARGV: prefix, id, holder, now, then field/value pairs; the job changes only while holder holds it.
# A pair whose value is "" removes the field; "=segments_total" copies that field.
_HELD = """
local key = ARGV[1] .. ARGV[2]
if redis.call('HGET', key, 'lease_owner') ~= ARGV[3] or redis.call('HGET', key, 'state') ~= 'translating' then
  return 0
end
for i = 5, #ARGV, 2 do
  local value = ARGV[i + 1]
  if value == '' then redis.call('HDEL', key, ARGV[i])
  elseif string.sub(value, 1, 1) == '=' then
    redis.call('HSET', key, ARGV[i], redis.call('HGET', key, string.sub(value, 2)))
  else redis.call('HSET', key, ARGV[i], value) end
end
redis.call('HSET', key, 'updated', ARGV[4])
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[2])
local state = redis.call('HGET', key, 'state')
if state == 'done' or state == 'error' then redis.call('ZREM', KEYS[1], ARGV[2]) end
return 1
"""
_RESULT = """
local key = ARGV[1] .. ARGV[2]
if redis.call('HGET', key, 'owner') ~= ARGV[3] or redis.call('HGET', key, 'state') ~= 'done' then
  return false
end
local got = redis.call('HMGET', key, 'filename', 'result')
if ARGV[4] == '1' then
  redis.call('DEL', key)
  redis.call('ZREM', KEYS[1], ARGV[2])
  redis.call('ZREM', KEYS[2], ARGV[2])
end
return got
"""


class RedisDocumentJobs:
    """The same jobs in Redis, when replica.cache_redis_url says the hosts share (a status call may
    land on another host than the upload did): a job is a hash under the prefix, each change one Lua
    script; DocumentJobs' methods and semantics, on redis-py's blocking client (called as DocumentJobs
    is: from the worker's thread, and from routes through asyncio.to_thread)."""

    def __init__(
        self, settings: RedisSettings, timeout_s: float = 5.0, clock: Callable[[], float] | None = None
    ) -> None:
        import time

        import redis

        self.prefix = settings.prefix + "doc:"
        self.clock = clock or time.time
        self.url = settings.url
        # Blobs travel here (an upload, a result): the socket timeout is the store's, not the cache's 0.25 s.
        self._client = redis.Redis.from_url(
            settings.url,
            socket_connect_timeout=settings.connect_timeout_s,
            socket_timeout=timeout_s,
            **settings.tls_options(),  # the same TLS as the cache's and the store's link
        )
        self._keys = [settings.prefix + "docs:open", settings.prefix + "docs:changed"]
        self._claim = self._client.register_script(_CLAIM)
        self._held = self._client.register_script(_HELD)
        self._result = self._client.register_script(_RESULT)

    def _call(self, work: Callable[[], T]) -> T:
        try:
            return work()
        except (OSError, redis_errors()) as err:
            why = f"{type(err).__name__}: {err}" if str(err) else type(err).__name__
            raise StoreUnavailable(f"document store redis {redacted(self.url)}: {why}") from None

    def add(self, job: Job, data: bytes) -> None:
        fields: dict[str, str | bytes] = {
            name: str(value)
            for name, value in zip(JOB_FIELDS, _job_values(job), strict=True)
            if value is not None
        }
        fields["input"] = data

        def write() -> Any:
            with self._client.pipeline(transaction=True) as multi:
                multi.hset(self.prefix + job.id, mapping=fields)  # type: ignore[arg-type]
                multi.zadd(self._keys[0], {job.id: job.created})
                multi.zadd(self._keys[1], {job.id: job.created})
                return multi.execute()

        self._call(write)

    def get(self, owner: str, job_id: str) -> Job | None:
        values = self._call(lambda: self._client.hmget(self.prefix + job_id, list(JOB_FIELDS)))
        job = _job_from_redis(values)
        return job if job is not None and job.owner == owner else None

    def claim(self, holder: str, lease_s: float, max_attempts: int) -> tuple[Job, bytes] | None:
        why = f"the job was taken up {max_attempts} times and never finished"
        args: list[Any] = [self.prefix, self.clock(), holder, lease_s, max_attempts, why]
        found = self._call(lambda: self._claim(keys=self._keys, args=args))
        if not found:
            return None
        job_id = found.decode() if isinstance(found, bytes) else str(found)
        values: Any = self._call(lambda: self._client.hmget(self.prefix + job_id, [*JOB_FIELDS, "input"]))
        job = _job_from_redis(values[:-1])
        return None if job is None else (job, bytes(values[-1] or b""))

    def _change(self, job_id: str, holder: str, *pairs: Any) -> bool:
        args = [self.prefix, job_id, holder, self.clock(), *pairs]
        return bool(self._call(lambda: self._held(keys=self._keys, args=args)))

    def progress(self, job_id: str, holder: str, lease_s: float, done: int, total: int, cached: int) -> bool:
        until = self.clock() + lease_s
        pairs = (
            "segments_done",
            done,
            "segments_total",
            total,
            "segments_cached",
            cached,
            "lease_until",
            until,
        )
        return self._change(job_id, holder, *pairs)

    def finish(self, job_id: str, holder: str, result: bytes, billed: int) -> bool:
        pairs = ("result", result, "billed_characters", billed, "segments_done", "=segments_total")
        return self._change(job_id, holder, *pairs, "state", "done", "lease_owner", "")

    def fail(self, job_id: str, holder: str, error: str) -> bool:
        return self._change(job_id, holder, "error", error[:1000], "state", "error", "lease_owner", "")

    def release(self, job_id: str, holder: str) -> bool:
        return self._change(job_id, holder, "state", "queued", "lease_until", 0, "lease_owner", "")

    def result(self, owner: str, job_id: str, remove: bool) -> tuple[str, bytes] | None:
        args = [self.prefix, job_id, owner, "1" if remove else "0"]
        got = self._call(lambda: self._result(keys=self._keys, args=args))
        return None if not got else (bytes(got[0]).decode(), bytes(got[1] or b""))

    def expire(self, ttl_s: float) -> int:
        old = self._call(lambda: self._client.zrangebyscore(self._keys[1], "-inf", self.clock() - ttl_s))
        if not old:
            return 0
        ids = [i.decode() if isinstance(i, bytes) else str(i) for i in old]

        def delete() -> Any:
            with self._client.pipeline(transaction=True) as multi:
                multi.delete(*(self.prefix + i for i in ids))
                multi.zrem(self._keys[0], *ids)
                multi.zrem(self._keys[1], *ids)
                return multi.execute()

        self._call(delete)
        return len(ids)

    def close(self) -> None:
        self._client.close()


def _job_values(job: Job) -> tuple[Any, ...]:
    return tuple(getattr(job, name) for name in JOB_FIELDS)


def _job_from_redis(values: list[Any]) -> Job | None:
    if values[0] is None:
        return None
    out: list[Any] = []
    for name, raw in zip(JOB_FIELDS, values, strict=True):
        text = None if raw is None else (raw.decode() if isinstance(raw, bytes) else str(raw))
        if name in _JOB_COUNTS:
            out.append(int(float(text or 0)))
        elif name in _JOB_NUMBERS:
            out.append(None if text is None else float(text))
        else:
            out.append(text)
    lease = out[JOB_FIELDS.index("lease_until")]
    out[JOB_FIELDS.index("lease_until")] = 0.0 if lease is None else lease
    return Job(*out)

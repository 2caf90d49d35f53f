"""The process's soft limit on open files raised to its hard limit, for it and every child it starts."""

from __future__ import annotations

import resource


def raise_soft_limit() -> tuple[int, int]:
    """RLIMIT_NOFILE's soft limit raised to the hard one; (before, after).

    A login shell's soft limit is often 1,024, while under a burst each request Nginx holds takes two
    of its connections (the client's and the replica's) and each a replica holds one: a 600-string burst
    would run Nginx out of files. Raising the soft limit up to the hard one needs no privilege, and Nginx
    and the replicas, started by this process, inherit it. An unlimited hard limit is left as it is.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft == hard:
        return soft, soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError):  # a platform that caps it below the hard limit (macOS's OPEN_MAX)
        return soft, soft
    return soft, hard

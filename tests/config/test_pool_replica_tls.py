"""The replicas' TLS pair is host-wide: a pool's own replica.tls_cert or tls_key is refused at load,
naming the key and where it belongs; the top-level pair with pools is taken, every pool listening with it."""

from __future__ import annotations

from typing import Any

import pytest

from hunyuan_serve.config import ConfigError, build_config, resolve_pools

PAIR = {"tls_cert": "/etc/hs/r.crt", "tls_key": "/etc/hs/r.key"}
WHERE = "TLS on the replicas is host-wide; set replica.tls_cert and replica.tls_key at the top level"

REFUSED: list[tuple[dict[str, Any], dict[str, Any], str]] = [
    ({}, PAIR, "pools.mt.replica.tls_cert and pools.mt.replica.tls_key: "),
    ({}, {"tls_cert": "/etc/hs/r.crt"}, "pools.mt.replica.tls_cert: "),
    ({}, {"tls_key": "/etc/hs/r.key"}, "pools.mt.replica.tls_key: "),
    # The top-level pair set as well: a pool's other pair would still not be what the listing says.
    (PAIR, {"tls_cert": "/etc/hs/other.crt", "tls_key": "/etc/hs/other.key"}, "pools.mt.replica.tls_cert"),
    (PAIR, {"tls_cert": PAIR["tls_cert"]}, "pools.mt.replica.tls_cert: "),
]


@pytest.mark.parametrize(("top", "pool", "named"), REFUSED)
def test_a_pools_own_replica_tls_pair_is_refused_naming_the_key(
    top: dict[str, Any], pool: dict[str, Any], named: str
) -> None:
    data = {"replica": top, "pools": [{"name": "chimera"}, {"name": "mt", "replica": pool}]}
    with pytest.raises(ConfigError) as err:
        build_config(data, {})
    assert named in str(err.value) and WHERE in str(err.value), err.value


def test_the_top_level_pair_with_pools_is_every_pools() -> None:
    cfg = build_config({"replica": PAIR, "pools": [{"name": "mt", "replica": {"max_in_flight": 8}}]}, {})
    (mt,) = resolve_pools(cfg)
    assert (mt.cfg.replica.tls_cert, mt.cfg.replica.tls_key) == (PAIR["tls_cert"], PAIR["tls_key"])
    assert mt.cfg.replica.max_in_flight == 8

"""Config `pools`: each pool's effective config, and the refusals naming the field."""

from __future__ import annotations

from typing import Any

import pytest

from hunyuan_serve.config import DEFAULT_POOL, ConfigError, build_config, default_pool, resolve_pools


def test_no_pools_section_is_one_default_pool_of_the_top_level_settings() -> None:
    cfg = build_config({"replicas": 2, "engine": {"model": "/m/a"}}, {})
    (pool,) = resolve_pools(cfg)
    assert (pool.name, pool.cfg, default_pool(cfg)) == (DEFAULT_POOL, cfg, DEFAULT_POOL)


def test_each_pool_overrides_the_top_level_sections() -> None:
    cfg = build_config(
        {
            "engine": {"max_num_seqs": 64, "dtype": "float32"},
            "pools": [
                {"name": "mt", "model": "/m/mt", "replicas": 2, "chimera_pool": "chimera"},
                {
                    "name": "chimera",
                    "model": "/m/c",
                    "engine": {"max_num_seqs": 8},
                    "replica": {"max_in_flight": 16},
                },
            ],
        },
        {},
    )
    mt, chimera = resolve_pools(cfg)
    assert (mt.name, mt.cfg.engine.model, mt.cfg.replicas, mt.cfg.engine.max_num_seqs) == (
        "mt",
        "/m/mt",
        2,
        64,
    )
    assert (chimera.cfg.engine.model, chimera.cfg.replicas, chimera.cfg.engine.max_num_seqs) == ("/m/c", 1, 8)
    assert chimera.cfg.replica.max_in_flight == 16 and chimera.cfg.engine.dtype == "float32"
    assert mt.chimera_pool == "chimera" and mt.cfg.pools == () and default_pool(cfg) == "mt"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"pools": [{"name": "a"}, {"name": "a"}]}, "pools: the name 'a' is repeated"),
        (
            {"pools": [{"name": "a", "gpus": [0]}, {"name": "b", "gpus": "1,0"}]},
            "pools.b.gpus: GPU 0 is already pool a's",
        ),
        ({"pools": [{"name": "a", "engine": {"max_num_seqs": 0}}]}, "pools.a.engine.max_num_seqs"),
        ({"pools": [{"name": "a", "engine": {"no_such_key": 1}}]}, "pools.a.engine.no_such_key"),
        ({"pools": [{"name": "Big"}]}, "pools[0].name: 'Big'"),
        ({"pools": [{"name": "a"}], "default_pool": "b"}, "default_pool: 'b' is not a pool"),
        ({"default_pool": "mt"}, "default_pool: 'mt' is not a pool"),
        ({"pools": [{"name": "a", "chimera_pool": "a"}]}, "pools.a.chimera_pool: 'a' is not another pool"),
        ({"pools": [{"name": "a", "chimera_pool": "z"}]}, "pools.a.chimera_pool: 'z' is not another pool"),
        ({"pools": [{"name": "a", "replicas": 0}]}, "pools[0].replicas"),
    ],
)
def test_a_bad_pool_is_refused_naming_the_field(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        build_config(data, {})
    assert message in str(err.value)


def test_a_pool_with_a_chimera_pool_needs_its_fusion_deadline_under_its_request_deadline() -> None:
    pools = [{"name": "mt", "chimera_pool": "c"}, {"name": "c"}]
    with pytest.raises(ConfigError) as err:
        build_config({"replica": {"request_timeout_s": 20}, "pools": pools}, {})
    assert "pools.mt.replica.chimera_timeout_s (30) must be under its request_timeout_s (20)" in str(
        err.value
    )
    build_config({"replica": {"request_timeout_s": 60}, "pools": pools}, {})  # 30 < 60: fine

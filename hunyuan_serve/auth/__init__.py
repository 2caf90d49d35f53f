"""API keys and the peer secret: the keys file, where a key comes from, the listen check, the checks."""

from hunyuan_serve.auth.deep_health import DeepHealthGuard, deep_refusal, wants_deep
from hunyuan_serve.auth.keys import (
    KEY_PRIORITIES,
    KeySpec,
    key_id,
    key_limits,
    key_matches,
    key_priorities,
    key_specs_by_id,
    load_key_specs,
    load_keys,
)
from hunyuan_serve.auth.listen import is_loopback, open_listen_problem
from hunyuan_serve.auth.middleware import ACCESS_LOG, KEY_ID_STATE, KEY_STATE, KeyCheck, PeerCheck, install
from hunyuan_serve.auth.peer import PEER_HEADER, load_peer_secret, peer_headers, peer_matches, peer_secret
from hunyuan_serve.auth.secret_files import exposed_secrets, refuse_exposed
from hunyuan_serve.auth.sources import body_key, client_address, header_key, request_key
from hunyuan_serve.auth.throttle import BadKeys

__all__ = [
    "ACCESS_LOG",
    "KEY_ID_STATE",
    "KEY_PRIORITIES",
    "KEY_STATE",
    "PEER_HEADER",
    "BadKeys",
    "DeepHealthGuard",
    "KeyCheck",
    "KeySpec",
    "PeerCheck",
    "body_key",
    "client_address",
    "deep_refusal",
    "exposed_secrets",
    "header_key",
    "install",
    "is_loopback",
    "key_id",
    "key_limits",
    "key_matches",
    "key_priorities",
    "key_specs_by_id",
    "load_key_specs",
    "load_keys",
    "load_peer_secret",
    "open_listen_problem",
    "peer_headers",
    "peer_matches",
    "peer_secret",
    "refuse_exposed",
    "request_key",
    "wants_deep",
]

"""A backend_config value out of range is refused when the memory is made, naming the key:
never a store that fails every call later ("did not answer within -1 s"), scores that are
all NaN, or two redis stores whose keys overlap."""

from __future__ import annotations

import math

import pytest

from longterm import ConfigurationError, LongTermMemory

BAD = [
    ("redis", {"socket_timeout": 0}, "socket_timeout"),
    ("redis", {"socket_timeout": -1}, "socket_timeout"),
    ("redis", {"socket_timeout": math.nan}, "socket_timeout"),
    ("redis", {"socket_timeout": math.inf}, "socket_timeout"),
    ("redis", {"max_connections": -3}, "max_connections"),
    ("redis", {"port": 0}, "port"),
    # A prefix is segments each ending in one ":"; an empty segment is refused.
    ("redis", {"prefix": "a::"}, "prefix"),
    ("redis", {"prefix": "Plt"}, "prefix"),
    ("redis", {"prefix": ""}, "prefix"),
    ("opensearch", {"timeout": 0}, "timeout"),
    ("opensearch", {"workers": 0}, "workers"),
    ("opensearch", {"replicas": -1}, "replicas"),
    ("qdrant", {"timeout": -1, "url": "http://127.0.0.1:1"}, "timeout"),
    ("mem0", {"threshold": 5}, "threshold"),
    ("mem0", {"timeout": -1}, "timeout"),
    ("mem0", {"max_record_bytes": 0}, "max_record_bytes"),
    ("local", {"max_record_bytes": -1}, "max_record_bytes"),
    ("local", {"vector_weight": math.nan}, "vector_weight"),
    ("local", {"fulltext_weight": -0.5}, "fulltext_weight"),
    ("local", {"candidates": 0}, "candidates"),
]


@pytest.mark.parametrize(("backend", "config", "key"), BAD, ids=[f"{b}-{k}-{c[k]}" for b, c, k in BAD])
def test_an_out_of_range_value_is_refused_naming_its_key(backend: str, config: dict, key: str, tmp_path) -> None:
    with pytest.raises(ConfigurationError, match=f"'{key}'"):
        LongTermMemory(backend=backend, backend_config={**config}, index="i")


def test_the_prefixes_the_suite_and_the_default_use_are_accepted() -> None:
    for prefix in ("longterm:", "t0123abcd:", "my.app-1_x:"):
        assert LongTermMemory(backend="redis", backend_config={"prefix": prefix}).backend_name == "redis"


def test_a_redis_url_redis_py_cannot_read_is_a_configuration_error_saying_the_form() -> None:
    for url in ("http://127.0.0.1:6379", "redis://127.0.0.1:notaport/0"):
        with pytest.raises(ConfigurationError, match=r"redis url .* is not valid .* use redis://"):
            LongTermMemory(backend="redis", backend_config={"url": url})


def test_an_opensearch_user_without_a_password_sends_an_empty_one() -> None:
    memory = LongTermMemory(backend="opensearch", backend_config={"username": "reader", "url": "http://127.0.0.1:1"})
    assert memory.backend_instance.auth == ("reader", "")

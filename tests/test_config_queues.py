"""Config of Queues: `[[queues.producers]]` and `[[queues.consumers]]`, defaults, refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from celld.project import load_config
from celld.project.queues import QueueConsumer, QueueProducer
from celld.store.choice import check_store
from tests.test_config import error_of, json_project, make_project

TOML = """
name = "w"
main = "src/index.js"

[[queues.producers]]
binding = "JOBS"
queue = "jobs"
delivery_delay = 30

[[queues.consumers]]
queue = "jobs"
max_batch_size = 50
max_batch_timeout = 0.5
max_retries = 0
retry_delay = 12
dead_letter_queue = "jobs-dead"
max_concurrency = 4

[[queues.consumers]]
queue = "jobs-dead"
"""


def test_producers_and_consumers_with_cloudflares_defaults(tmp_path: Path) -> None:
    queues = load_config(make_project(tmp_path, "wrangler.toml", TOML)).bindings.queues
    assert queues.producers == (QueueProducer("JOBS", "jobs", 30),)
    assert queues.consumers == (
        QueueConsumer("jobs", 50, 500, 0, 12, "jobs-dead", 4),
        QueueConsumer("jobs-dead", 10, 5000, 3, 0, None, 20),
    )


@pytest.mark.parametrize(
    ("queues", "where", "says"),
    [
        ({"consumers": [{"queue": "q", "max_batch_size": 101}]}, "max_batch_size", "between 1"),
        ({"consumers": [{"queue": "q", "max_batch_timeout": 61}]}, "max_batch_timeout", "60"),
        ({"consumers": [{"queue": "q", "max_retries": 101}]}, "max_retries", "100"),
        ({"consumers": [{"queue": "q", "retry_delay": 86401}]}, "retry_delay", "86,400"),
        ({"consumers": [{"queue": "q", "max_concurrency": 0}]}, "max_concurrency", "between 1"),
        (
            {"producers": [{"binding": "Q", "queue": "q", "delivery_delay": -1}]},
            "delivery_delay",
            "between 0",
        ),
        ({"consumers": [{"queue": "q", "dead_letter_queue": "q"}]}, "dead_letter_queue", "its own"),
        (
            {"consumers": [{"queue": "q"}, {"queue": "q"}]},
            "consumers[1].queue",
            "already has a consumer",
        ),
        ({"consumers": [{"queue": "q", "type": "http_pull"}]}, "type", "HTTP API"),
        ({"consumers": [{"queue": "q", "max_batch_sise": 3}]}, "max_batch_sise", "did you mean"),
        ({"producers": [{"binding": "not ok", "queue": "q"}]}, "binding", "JavaScript identifier"),
        ({"producers": [{"binding": "Q", "queue": "../q"}]}, "queue", "not a name"),
    ],
)
def test_bad_settings_are_refused_naming_the_key(
    tmp_path: Path, queues: dict, where: str, says: str
) -> None:
    message = str(error_of(json_project(tmp_path, {"queues": queues})))
    assert f"queues.{where}" in message or where in message, message
    assert says in message, message


@pytest.mark.parametrize(
    ("date", "flags", "expected"),
    [
        ("2024-03-17", [], "v8"),
        ("2024-03-18", [], "json"),
        ("2024-01-01", ["queues_json_messages"], "json"),
        ("2026-01-01", ["no_queues_json_messages"], "v8"),
    ],
)
def test_the_default_body_type_follows_the_compatibility_date(
    tmp_path: Path, date: str, flags: list[str], expected: str
) -> None:
    extra = {
        "compatibility_date": date,
        "compatibility_flags": flags,
        "queues": {"producers": [{"binding": "Q", "queue": "q"}]},
    }
    queues = load_config(json_project(tmp_path, extra)).bindings.queues
    assert queues.default_content_type == expected


def test_a_producer_binding_name_is_one_name_in_env(tmp_path: Path) -> None:
    path = json_project(
        tmp_path,
        {"vars": {"Q": "x"}, "queues": {"producers": [{"binding": "Q", "queue": "q"}]}},
    )
    assert "binding name 'Q' is already used by vars.Q" in str(error_of(path))


def test_queues_on_a_shared_postgresql_store_are_accepted(tmp_path: Path) -> None:
    bindings = load_config(make_project(tmp_path, "wrangler.toml", TOML)).bindings
    check_store("postgresql://u@h:5432/db", bindings)  # celld/queues/pgqueues.py
    check_store(None, bindings)

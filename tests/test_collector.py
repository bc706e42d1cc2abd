"""The collector settled for serving (celld/server/collector.py): start-up's heap frozen,
later garbage still collected, every pass timed for the metrics."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from celld.server import collector


class Node:
    """A container that can sit in a reference cycle and be watched by a weakref."""

    def __init__(self) -> None:
        self.other: Node | None = None


@pytest.fixture
def thawed() -> Iterator[None]:
    yield
    gc.unfreeze()  # the test process goes on with its collector as it was


def test_start_up_objects_are_frozen_and_left_out_of_full_passes(thawed: None) -> None:
    kept = [Node() for _ in range(1_000)]
    frozen = collector.freeze_start_up_heap()
    assert frozen >= len(kept)
    assert frozen == gc.get_freeze_count()
    assert not any(gc.is_tracked(k) and k in gc.get_objects(2) for k in kept[:3])


def test_cycles_made_after_the_freeze_are_still_collected(thawed: None) -> None:
    collector.freeze_start_up_heap()
    first, second = Node(), Node()
    first.other, second.other = second, first
    gone = weakref.ref(first)
    del first, second
    assert gone() is not None  # only a pass of the collector frees a cycle
    gc.collect()
    assert gone() is None


def test_every_pass_is_counted_and_timed() -> None:
    collector.watch()
    collector.watch()  # once per process, however often asked
    assert gc.callbacks.count(collector.pauses) == 1
    before = collector.pauses.count[2]
    gc.collect(2)
    gc.collect(2)
    assert collector.pauses.count[2] == before + 2
    assert collector.pauses.longest[2] > 0
    assert collector.pauses.seconds[2] >= collector.pauses.longest[2]

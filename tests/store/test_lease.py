"""The lease a node obeys itself (celld/store/lease.py): validity on the monotonic clock
from the renewal's send, lapses announced, epochs whose fences never open again."""

from __future__ import annotations

import asyncio
import time

from celld.store.lease import NO_LEASE, Lease


async def test_validity_runs_from_the_renewals_send_minus_the_margin() -> None:
    lease = Lease(margin_s=0.2)
    assert not lease.allows_effects()  # never renewed
    # sent 1 s ago, 1.5 s of lease left on the database's clock when it answered: what
    # the answer took counts against it, and the margin is kept in hand
    lease.renewed(time.monotonic() - 1.0, 1.5)
    assert lease.allows_effects()
    assert 0.0 < lease.time_left() <= 0.3
    lapsed = asyncio.Event()
    lease.on_change(lambda allowed: None if allowed else lapsed.set())
    await asyncio.wait_for(lapsed.wait(), 10)  # the timer at valid_until says so
    assert not lease.allows_effects() and lease.time_left() < 0


async def test_a_renewal_sent_before_a_pause_longer_than_the_lease_is_not_valid() -> None:
    lease = Lease(margin_s=0.1)
    # the database answered during a pause: 5 s left on its clock, but the renewal was
    # sent 6 s ago (the pause counts)
    lease.renewed(time.monotonic() - 6.0, 5.0)
    assert not lease.allows_effects()


async def test_a_lapse_is_told_once_and_a_renewal_makes_it_valid_again() -> None:
    lease = Lease(margin_s=0.0)
    told: list[bool] = []
    lease.renewed(time.monotonic(), 60)
    lease.on_change(told.append)
    lease.lapse("the database found it over")
    lease.lapse("again")
    assert not lease.allows_effects()
    waiting = asyncio.get_running_loop().create_task(lease.wait_valid())
    await asyncio.sleep(0)
    assert not waiting.done()
    lease.renewed(time.monotonic(), 60)
    await asyncio.wait_for(waiting, 10)
    assert told == [False, True]
    lease.close()


async def test_fences_of_an_older_token_never_open_again() -> None:
    lease = Lease(margin_s=0.0)
    lease.new_epoch(7)
    lease.renewed(time.monotonic(), 60)
    old = lease.fence()
    assert old is not None and old.allows_effects()
    seen: list[tuple[int, int, bool]] = []
    lease.on_epoch(lambda before, now: seen.append((before, now, lease.allows_effects())))
    told: list[bool] = []
    old.on_change(told.append)
    lease.new_epoch(9)
    lease.renewed(time.monotonic(), 60)
    # the listeners dropped what the old token loaded before the new one was valid
    assert seen == [(7, 9, False)]
    assert old.stale and not old.allows_effects()
    assert told == [False, False]  # told of the lapse and of the renewal: shut both times
    new = lease.fence()
    assert new is not None and new.allows_effects()
    lease.close()


def test_a_store_of_one_node_has_nothing_to_fence() -> None:
    assert NO_LEASE.allows_effects()
    assert NO_LEASE.fence() is None

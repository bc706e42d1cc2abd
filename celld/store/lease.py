"""A node's lease on a store shared by several nodes, as the node itself obeys it.

The database fences a node's *commits*: each one checks the node's row and its owner
columns (celld/store/pgnodes.py). That alone lets a node that was paused (a long GC
pause, SIGSTOP, a partition from the database) go on running JS and sending fetches and
binding calls beside the node that took its instances over. So the node fences itself
too, and this module is the one place that decides when it may act.

Rules:

* Validity is measured from the database's clock at the last renewal and tracked on the
  local monotonic clock from the moment that renewal was *sent*:
  ``valid_until = sent_at + (lease_until - db_now) - margin``. Whatever happens between
  the send and the answer (a slow network, a pause of this process) counts against it,
  and the margin covers the time between a check here and an effect leaving. The
  database cannot reap the node (and no other node can take its instances) before
  ``lease_until`` on its own clock, which is never earlier than the local
  ``valid_until``.
* :meth:`Lease.allows_effects` reads the monotonic clock at each call: it is exact at the
  moment of asking, whatever timers did or did not fire (after a pause, I/O callbacks can
  run before any timer). Callers ask right before starting a JS turn and right before a
  message leaves an isolate (celld/isolate/host.py); while it says no, turns wait and
  messages are held. A fetch asks once more as its bytes are written
  (celld/isolate/outbound.py), since a pause between its dispatch and its write would
  otherwise send it after the lease ended.
* Commits are not held here: the database judges them by the lease it holds (every commit
  locks the node's row and checks it is current), which is the authority; a commit that
  lands while the node's own validity has lapsed but the database's has not is correct.
* Each token the node joins under is an *epoch*. A :class:`Fence` is bound to the epoch
  current when it was made (a cell takes one when it is loaded): once the node rejoins
  under a new token, the fences of the old epoch never allow anything again, so memory
  loaded under the old token can never act, even if a run of it starts late. Listeners
  of :meth:`Lease.on_epoch` (the cell manager) drop every cell of the old epoch, before
  the new epoch's first renewal makes the lease valid again.
* :meth:`Lease.on_change` tells listeners when validity flips: ``False`` when the lease
  lapsed (a timer at ``valid_until``, or at once when the store learns it was taken
  over), ``True`` when a renewal makes it valid again. A listener that holds work while
  the lease is invalid resumes it on ``True`` (and asks `allows_effects` again then).

A store that only one node uses (SQLite) has no lease: :data:`NO_LEASE` always allows,
and its :meth:`Lease.fence` is None (nothing to consult).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable
from typing import Protocol

log = logging.getLogger("celld.nodes")

#: Told whether the lease (or fence) allows effects now that it changed.
ChangeListener = Callable[[bool], None]
#: Told (old epoch, new epoch) when the node rejoined under a new token.
EpochListener = Callable[[int, int], None]


class EffectFence(Protocol):
    """What a turn or an outgoing message consults (an isolate's host, the output gate)."""

    def allows_effects(self) -> bool:
        """True if JS may run and messages may leave now."""
        ...

    def on_change(self, listener: ChangeListener) -> Callable[[], None]:
        """Call `listener(allowed)` whenever this may have changed; returns a function
        that unsubscribes it."""
        ...


class Lease:
    """The node's lease as the node obeys it: valid until a local monotonic deadline."""

    def __init__(self, *, margin_s: float, name: str = "node") -> None:
        self.margin_s = margin_s
        self.name = name
        #: the token the node holds now (0 before it joins); fences of older ones are stale
        self.epoch = 0
        self._valid_until = -math.inf  # monotonic seconds
        self._announced = False  # the validity listeners were last told
        self._lapsed_at: float | None = None  # monotonic time a lapse was announced
        self._listeners: dict[int, ChangeListener] = {}
        self._epoch_listeners: list[EpochListener] = []
        self._next_id = 0
        self._timer: asyncio.TimerHandle | None = None

    # -- asking ---------------------------------------------------------------------------

    def allows_effects(self) -> bool:
        """True while the lease is valid (read from the monotonic clock now)."""
        return time.monotonic() < self._valid_until

    def valid(self) -> bool:
        return self.allows_effects()

    def time_left(self) -> float:
        """Seconds of validity left (negative: lapsed that long ago; -inf: never valid)."""
        return self._valid_until - time.monotonic()

    def fence(self) -> Fence | None:
        """A fence bound to the current epoch, for a cell loaded now."""
        return Fence(self, self.epoch)

    async def wait_valid(self) -> None:
        """Return once the lease allows effects (at once if it does)."""
        while not self.allows_effects():
            changed = asyncio.get_running_loop().create_future()

            def told(allowed: bool, changed: asyncio.Future[None] = changed) -> None:
                if allowed and not changed.done():
                    changed.set_result(None)

            unsubscribe = self.on_change(told)
            try:
                await changed
            finally:
                unsubscribe()

    # -- listening ------------------------------------------------------------------------

    def on_change(self, listener: ChangeListener) -> Callable[[], None]:
        key = self._next_id
        self._next_id += 1
        self._listeners[key] = listener

        def unsubscribe() -> None:
            self._listeners.pop(key, None)

        return unsubscribe

    def on_epoch(self, listener: EpochListener) -> None:
        """Call `listener(old, new)` when the node rejoins under a new token, before the
        new token's lease is valid (drop everything loaded under the old one there)."""
        self._epoch_listeners.append(listener)

    # -- what the store's membership reports --------------------------------------------------

    def renewed(self, sent_at: float, remaining_s: float) -> None:
        """A renewal sent at monotonic `sent_at` left `remaining_s` of lease on the
        database's clock (lease_until - now, read by the statement that renewed it)."""
        self._valid_until = sent_at + remaining_s - self.margin_s
        self._arm()
        if self.allows_effects() and not self._announced:
            if self._lapsed_at is not None:
                log.warning(
                    "%s %d holds its lease again after %.2f s: its cells run again",
                    self.name,
                    self.epoch,
                    time.monotonic() - self._lapsed_at,
                )
                self._lapsed_at = None
            self._announce(True)

    def lapse(self, why: str) -> None:
        """The store learned the lease is gone or over (a commit was refused, a renewal
        found the row taken over): invalid now, whatever time was left."""
        self._valid_until = -math.inf
        self._check(why)

    def new_epoch(self, epoch: int) -> None:
        """The node joined again under token `epoch`: every fence of an older epoch is
        stale for good, and the epoch listeners drop what was loaded under it."""
        old, self.epoch = self.epoch, epoch
        if old == epoch:
            return
        self._valid_until = -math.inf
        self._check("it joins again under a new token")
        for listener in list(self._epoch_listeners):
            try:
                listener(old, epoch)
            except Exception:  # noqa: BLE001 - the others must still hear of it
                log.exception("a listener of the node's new token failed")

    def close(self) -> None:
        """The node left: nothing is allowed any more (and no timer is left behind)."""
        self._valid_until = -math.inf
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._announced = False

    # -- inside -------------------------------------------------------------------------------

    def _arm(self) -> None:
        """A timer at `valid_until` announces a lapse (late after a pause; `allows_effects`
        never waits for it)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if math.isfinite(self._valid_until):
            loop = asyncio.get_running_loop()
            # loop.time() is the monotonic clock; a hair later than the deadline so the
            # check finds it passed
            delay = max(0.0, self._valid_until - time.monotonic()) + 0.001
            self._timer = loop.call_later(delay, self._check, "it was not renewed in time")

    def _check(self, why: str) -> None:
        self._timer = None
        if self._announced and not self.allows_effects():
            log.warning(
                "%s %d's lease lapsed (%s): its cells are stopped (no JS turn runs, nothing "
                "leaves) until it renews",
                self.name,
                self.epoch,
                why,
            )
            self._lapsed_at = time.monotonic()
            self._announce(False)
        elif self.allows_effects():
            self._arm()  # renewed meanwhile: wait for the new deadline

    def _announce(self, allowed: bool) -> None:
        self._announced = allowed
        for listener in list(self._listeners.values()):
            try:
                listener(allowed)
            except Exception:  # noqa: BLE001 - one listener must not stop the others
                log.exception("a listener of the node's lease failed")


class Fence:
    """The lease as one cell sees it: allows only while the lease is valid and the node
    still holds the token the cell was loaded under."""

    __slots__ = ("epoch", "lease")

    def __init__(self, lease: Lease, epoch: int) -> None:
        self.lease = lease
        self.epoch = epoch

    @property
    def stale(self) -> bool:
        """The node rejoined under another token: this fence never allows again."""
        return self.lease.epoch != self.epoch

    def allows_effects(self) -> bool:
        return self.lease.epoch == self.epoch and self.lease.allows_effects()

    def on_change(self, listener: ChangeListener) -> Callable[[], None]:
        return self.lease.on_change(lambda _: listener(self.allows_effects()))


class _NoLease(Lease):
    """A store one node uses alone: always valid, never changes."""

    def __init__(self) -> None:
        super().__init__(margin_s=0.0, name="node")
        self._valid_until = math.inf
        self._announced = True

    def allows_effects(self) -> bool:
        return True

    def fence(self) -> Fence | None:
        return None

    def on_change(self, listener: ChangeListener) -> Callable[[], None]:
        return _nothing  # it never changes (and holds no listener)

    def on_epoch(self, listener: EpochListener) -> None:
        pass  # there is no other token to join under


def _nothing() -> None:
    pass


#: The lease of a store with no other node to answer to.
NO_LEASE: Lease = _NoLease()

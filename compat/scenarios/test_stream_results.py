"""Step results that are ReadableStreams of bytes : run() reads the
bytes back, a replay gets a new stream of them, and an oversized one is refused."""

from __future__ import annotations

from compat.differences import STREAM_RESULT_LIMIT, difference
from compat.scenario import Scenario

NO_RETRY = {"retries": {"limit": 0, "delay": 0}}


def stream_op(name: str, **more: object) -> dict[str, object]:
    return {"do": name, "returns": "stream", "once": True, **more}


def test_stream_result_read_back(sc: Scenario) -> None:
    """A step returning a stream of bytes (in several chunks) gives run() a stream of them."""
    i = sc.create([stream_op("s", text="hello stream", chunks=3)])
    assert sc.results(i) == [{"isStream": True, "text": "hello stream"}]


def test_empty_stream_result(sc: Scenario) -> None:
    """An empty stream is a result too: run() gets a stream that ends at once."""
    i = sc.create([stream_op("s", text="")])
    assert sc.results(i) == [{"isStream": True, "text": ""}]


def test_stream_result_replayed_as_a_new_stream(sc: Scenario) -> None:
    """Read back from storage after a sleep, the step gives a new stream of the same bytes
    (its callback does not run again)."""
    i = sc.create([stream_op("s", text="héllo ☃", chunks=2), {"sleep": "nap", "duration": 500}])
    sc.wait(500)
    assert sc.results(i) == [{"isStream": True, "text": "héllo ☃"}, {"slept": "nap"}]


def test_stream_result_under_the_limit(sc: Scenario) -> None:
    """A stream of 600 kB is accepted and read back whole, also after a replay."""
    size = 600_000
    i = sc.create([stream_op("s", size=size, chunks=9), {"sleep": "nap", "duration": 500}])
    sc.wait(500)
    assert sc.results(i) == [{"isStream": True, "length": size}, {"slept": "nap"}]


@difference(wrangler=STREAM_RESULT_LIMIT)
def test_stream_result_over_the_limit(sc: Scenario) -> None:
    """A stream of more than 1 MiB: celld fails the attempt (here the last) as too large;
    wrangler dev, as production documents, accepts it."""
    size = 1024 * 1024 + 16
    i = sc.create([stream_op("big", size=size, chunks=4, config=NO_RETRY)])
    s = sc.finished(i)
    if sc.pick(celld=False, wrangler=True):
        assert s["status"] == "complete"
        assert s["output"] == {"results": [{"isStream": True, "length": size}]}
    else:
        assert s["status"] == "errored"
        assert s["error"]["message"].endswith(
            "Step big-1 output is too large. Maximum allowed size is 1MiB."
        )


def test_stream_result_just_under_1_mib(sc: Scenario) -> None:
    """A stream of 1,000,000 bytes (under 1 MiB) is accepted and read back whole."""
    size = 1_000_000
    i = sc.create([stream_op("s", size=size, chunks=4, config=NO_RETRY)])
    assert sc.results(i) == [{"isStream": True, "length": size}]

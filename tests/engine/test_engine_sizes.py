"""Size limits: run() output as step results, and the buffer of events per instance."""

import pytest
from _engine_helpers import T0, new_machine

from celld.engine import Resolve
from celld.engine.errors import EventBufferFullError
from celld.engine.validation import MAX_BUFFERED_EVENTS, MAX_PAYLOAD_BYTES


def test_run_output_over_one_mib_fails_the_instance_instead_of_being_stored():
    m = new_machine()
    m.run_succeeded('"' + "x" * MAX_PAYLOAD_BYTES + '"', T0)
    view = m.status_view()
    assert view["status"] == "errored"
    assert "output is too large" in view["error"]["message"]
    assert m.state.output is None


def test_run_output_at_the_limit_is_stored():
    m = new_machine()
    output = '"' + "x" * (MAX_PAYLOAD_BYTES - 2) + '"'
    m.run_succeeded(output, T0)
    assert m.status_view() == {"status": "complete", "output": output}


def test_buffered_events_are_capped_with_a_clear_error():
    m = new_machine()
    for i in range(MAX_BUFFERED_EVENTS):
        m.send_event("t" if i % 2 else "u", f'"{i}"', T0)
    with pytest.raises(EventBufferFullError) as caught:
        m.send_event("t", '"one too many"', T0)
    assert str(MAX_BUFFERED_EVENTS) in str(caught.value)
    assert len(m.events()) == MAX_BUFFERED_EVENTS


def test_a_full_buffer_still_accepts_an_event_a_wait_takes_at_once():
    m = new_machine()
    for i in range(MAX_BUFFERED_EVENTS):
        m.send_event("t", f'"{i}"', T0)
    m.step_wait("w", 1, "other", None, T0)
    [(_, decision)] = m.send_event("other", '"taken"', T0 + 1)
    assert isinstance(decision, Resolve)
    # Receiving one frees a place in the buffer.
    m.step_wait("w2", 1, "t", None, T0 + 2)
    m.send_event("t", '"fits again"', T0 + 3)


def _bytes_value(size: int, tag: str = "Uint8Array") -> str:
    """A value holding `size` bytes as the serializer records it (base64 under "v")."""
    import base64
    import json

    payload = base64.b64encode(b"\x07" * size).decode()
    return json.dumps({"__celld_readable_stream__": {"$": tag, "v": payload}})


def test_binary_data_counts_by_its_bytes_not_by_its_base64():
    from celld.engine.validation import too_large

    assert not too_large(_bytes_value(1_000_000))  # 1.33 MB of base64, under 1 MiB of bytes
    assert not too_large(_bytes_value(MAX_PAYLOAD_BYTES - 100, "ArrayBuffer"))
    assert too_large(_bytes_value(MAX_PAYLOAD_BYTES + 1))
    # text is counted as it is, even next to a tag-like key that is not binary
    assert too_large('{"$":"BigInt","v":"' + "1" * MAX_PAYLOAD_BYTES + '"}')
    assert too_large('"' + "x" * MAX_PAYLOAD_BYTES + '"')


def test_a_step_returning_a_million_bytes_is_recorded():
    m = new_machine()
    m.step_do("s", 1, None, None, T0)
    m.attempt_succeeded(("do", "s", 1), 1, _bytes_value(1_000_000), T0)  # type: ignore[arg-type]
    (row,) = [r for r in m.steps() if r.name == "s"]
    assert row.state == "done"

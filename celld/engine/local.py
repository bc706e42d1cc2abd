"""What a run may decide in JS without asking the engine: the rules of a local step.

A step whose first attempt succeeds is resolved with its own value: the engine's answer
to that report (`Machine.attempt_succeeded`) is `Resolve(value)` unless the value is over
the step output limit, the report is stale, or the run is stopping. Asking for that answer
cost every step a round trip to Python (the report in one turn, the answer in the next).
So JS resolves such a step itself, in the same turn, and reports it as settled (`local`);
the engine records the report as it would any other, and the isolate's output gate holds
everything JS sends after it until the write lands (celld/cells/run.py,
`_settled_locally`). A run of steps then costs Python the batch of its reports, not a
crossing per step.

The rules are this table, first match wins, and nothing else: js/workflows/step.js
receives it as data (`STEP_RULES_JSON`, in the first `wf.start` an isolate sees) and
evaluates it with the same matcher (`decide`), and tests/cells/test_local_steps.py runs
the same cases through both and checks that the engine agrees with every "resolve".

A fact is what JS knows when an attempt finishes:

* ``allowed``: the host allows local steps for this run (no test modifiers, no replay
  under another version, no rollback run, not replaying at every step);
* ``mayBegin``: no pause is pending (the engine's `wf.hold`);
* ``ok``: the callback returned a value it could serialize (a failure's retries, backoff
  and delay functions stay with the engine: they need a durable wake-up);
* ``first``: it was the step's first attempt (a retry's answer went through the engine);
* ``alone``: no other attempt of the run is in flight (the engine's answer to one could
  stop the run);
* ``size``: an upper bound of the value's UTF-8 size, three bytes per UTF-16 unit of its
  text (so "fits" never disagrees with `too_large`, which counts bytes).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from celld.engine.validation import MAX_PAYLOAD_BYTES

RESOLVE = "resolve"
ASK = "ask"

#: (conditions, outcome): the first row whose conditions all hold decides. A condition is
#: a fact's required value, or for "sizeAtMost" the largest `size` allowed.
STEP_RULES: tuple[tuple[Mapping[str, Any], str], ...] = (
    ({"allowed": False}, ASK),
    ({"mayBegin": False}, ASK),
    ({"ok": False}, ASK),
    ({"first": False}, ASK),
    ({"alone": False}, ASK),
    ({"sizeAtMost": MAX_PAYLOAD_BYTES}, RESOLVE),
    ({}, ASK),  # maybe over the step output limit: the engine measures it
)

#: The table as JS receives it.
STEP_RULES_JSON = json.dumps([[dict(when), then] for when, then in STEP_RULES])


def decide(facts: Mapping[str, Any], rules: Any = STEP_RULES) -> str:
    """The outcome the table gives for `facts` (the matcher step.js mirrors)."""
    for when, then in rules:
        if all(_holds(facts, name, wanted) for name, wanted in dict(when).items()):
            return str(then)
    return ASK


def _holds(facts: Mapping[str, Any], name: str, wanted: Any) -> bool:
    if name == "sizeAtMost":
        return int(facts["size"]) <= int(wanted)
    return facts[name] == wanted

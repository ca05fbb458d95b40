"""schemathesis hooks of tests/schemathesis/run."""

import schemathesis

# A run starts `after_seconds` late, and the runs of a thread go in order: a run delayed by
# hours would hold every later run of the fixture threads, and the answer of a stream or a wait
# for as long. Those requests get runs delayed by a second at most; background runs on new
# threads (`POST /runs`, `/runs/batch`) keep any delay.
MAX_DELAY = 1.0


def _delays_what_waits(operation) -> bool:
    return "{thread_id}" in operation.path or operation.path in ("/runs/stream", "/runs/wait")


@schemathesis.hook
def map_body(context, body):
    if (
        isinstance(body, dict)
        and _delays_what_waits(context.operation)
        and isinstance(body.get("after_seconds"), (int, float))
        and not isinstance(body["after_seconds"], bool)
        and body["after_seconds"] > MAX_DELAY
    ):
        body["after_seconds"] = MAX_DELAY
    return body

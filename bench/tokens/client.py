"""Token latency through a LangGraph server, measured with the official SDK (langgraph-sdk).

measure: RUNS runs, CONCURRENCY of them streamed at once, each on a thread of its own, with
`runs.stream(..., stream_mode="messages-tuple")`. Every token the model sends carries the time
it was sent ("@<unix time>;", fake_model.py), so a token's latency is the time the client
received it minus that. The first token's latency is counted from just before the request that
creates the run. A run succeeded if its stream ended without an error event or exception and
carried all TOKENS tokens. Before measuring, WARMUP runs (untimed, as many at once) let the
server load the graph and start whatever it keeps warm. Prints one JSON line.

    client.py measure --url URL --server NAME [--api-key KEY] --concurrency C --runs N
    client.py ratio FILE     (the ratio lines mostrador / Aegra for every concurrency in FILE)
"""
import argparse
import asyncio
import json
import os
import statistics
import sys
import time

TARGETS = {"token_p50": 1.0, "token_p99": 1.5, "first_token_p50": 1.0}


def percentile(values, p):
    """Nearest-rank percentile of a non-empty list."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))]


def cpu_busy(seconds=1.0):
    """The share of all CPUs busy over `seconds` (from /proc/stat), or None off Linux."""
    def sample():
        with open("/proc/stat") as f:
            values = [int(v) for v in f.readline().split()[1:]]
        return values[3] + values[4], sum(values)  # idle + iowait, total
    try:
        idle0, total0 = sample()
        time.sleep(seconds)
        idle1, total1 = sample()
    except OSError:
        return None
    return 1 - (idle1 - idle0) / max(1, total1 - total0)


async def until_idle(limit_s, busy_below=0.15):
    """Waits (at most limit_s) until the machine is mostly idle; returns the last busy share."""
    deadline = time.time() + limit_s
    while True:
        busy = await asyncio.to_thread(cpu_busy)
        if busy is None or busy < busy_below or time.time() >= deadline:
            return busy


def rounded(x, digits=2):
    return None if x is None else round(x, digits)


async def one_run(client, assistant, expected, run_timeout):
    """Streams one run on a new thread; returns (token latencies ms, first token ms, ok, error)."""
    latencies, first, seen = [], None, set()
    thread = (await client.threads.create())["thread_id"]
    started = time.time()
    error = None

    async def consume():
        nonlocal first, error
        async for part in client.runs.stream(
            thread, assistant,
            input={"messages": [{"role": "user", "content": "hola"}]},
            stream_mode="messages-tuple",
        ):
            arrived = time.time()
            if part.event == "error":
                error = json.dumps(part.data)[:300]
                continue
            if part.event != "messages":
                continue
            message = part.data[0] if isinstance(part.data, (list, tuple)) else part.data
            if not isinstance(message, dict) or message.get("type") not in ("AIMessageChunk", "ai"):
                continue
            content = message.get("content")
            if not isinstance(content, str):
                continue
            for piece in content.split(";"):
                # A stamp seen before in this run (a server repeating the whole message at the
                # end) is not a token arriving again.
                if not piece.startswith("@") or piece in seen:
                    continue
                seen.add(piece)
                latencies.append((arrived - float(piece[1:])) * 1000)
                if first is None:
                    first = (arrived - started) * 1000

    try:
        await asyncio.wait_for(consume(), run_timeout)
    except Exception as e:  # a failed run is counted, not fatal
        error = error or f"{type(e).__name__}: {e}"[:300]
    ok = error is None and len(seen) == expected
    if error is None and not ok:
        error = f"{len(seen)} of {expected} tokens"
    return latencies, first, ok, error


async def measure(args):
    from langgraph_sdk import get_client

    client = get_client(url=args.url, api_key=args.api_key or None)

    async def batch(n, concurrency):
        queue = asyncio.Queue()
        for i in range(n):
            queue.put_nowait(i)
        results = []

        async def worker():
            while True:
                try:
                    queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                results.append(await one_run(client, args.assistant, args.tokens, args.run_timeout))

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return results

    if args.warmup:
        await batch(args.warmup, min(args.warmup, args.concurrency))
    busy_before = await until_idle(args.idle_wait)
    began = time.time()
    results = await batch(args.runs, args.concurrency)
    wall = time.time() - began
    latencies = [x for r in results for x in r[0]]
    firsts = [r[1] for r in results if r[1] is not None]
    errors = sorted({r[3] for r in results if r[3]})
    line = {
        "kind": "server",
        "server": args.server,
        "version": args.version,
        "concurrency": args.concurrency,
        "runs": args.runs,
        "runs_ok": sum(1 for r in results if r[2]),
        "tokens": len(latencies),
        "tokens_expected": args.runs * args.tokens,
        "token_latency_ms_p50": rounded(percentile(latencies, 50)) if latencies else None,
        "token_latency_ms_p99": rounded(percentile(latencies, 99)) if latencies else None,
        "token_latency_ms_max": rounded(max(latencies)) if latencies else None,
        "first_token_ms_p50": rounded(statistics.median(firsts), 1) if firsts else None,
        "first_token_ms_max": rounded(max(firsts), 1) if firsts else None,
        "wall_s": round(wall, 2),
        "cpu_busy_pct_before": None if busy_before is None else round(100 * busy_before, 1),
        "errors": errors[:3],
        "at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    print(json.dumps(line), flush=True)
    return 0 if line["runs_ok"] == args.runs else 1


def ratio(path):
    """One line per concurrency with both mostrador and aegra: mostrador / Aegra and the targets."""
    latest = {}
    with open(path) as f:
        for text in f:
            text = text.strip()
            if not text:
                continue
            row = json.loads(text)
            if row.get("kind") == "server":
                latest[(row["server"], row["concurrency"])] = row
    for c in sorted({c for (_, c) in latest}):
        ours, theirs = latest.get(("mostrador", c)), latest.get(("aegra", c))
        if not ours or not theirs:
            continue
        fields = {"token_p50": "token_latency_ms_p50", "token_p99": "token_latency_ms_p99",
                  "first_token_p50": "first_token_ms_p50"}
        out = {"kind": "ratio", "of": "mostrador / aegra", "concurrency": c}
        met = True
        for name, field in fields.items():
            a, b = ours.get(field), theirs.get(field)
            value = round(a / b, 3) if a is not None and b else None
            out[name] = value
            out[name + "_target"] = f"<= {TARGETS[name]}"
            met = met and value is not None and value <= TARGETS[name]
        out["runs_ok"] = {"mostrador": f"{ours['runs_ok']}/{ours['runs']}",
                          "aegra": f"{theirs['runs_ok']}/{theirs['runs']}"}
        out["targets_met"] = met and ours["runs_ok"] == ours["runs"] and theirs["runs_ok"] == theirs["runs"]
        print(json.dumps(out), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("measure")
    m.add_argument("--url", required=True)
    m.add_argument("--server", required=True)
    m.add_argument("--version", default="")
    m.add_argument("--api-key", default="")
    m.add_argument("--assistant", default="chat")
    m.add_argument("--concurrency", type=int, default=1)
    m.add_argument("--runs", type=int, default=10)
    m.add_argument("--warmup", type=int, default=2)
    m.add_argument("--tokens", type=int, default=int(os.environ.get("TOKENS", "50")))
    m.add_argument("--run-timeout", type=float, default=120.0)
    m.add_argument("--idle-wait", type=float, default=float(os.environ.get("IDLE_WAIT", "60")),
                   help="seconds to wait, at most, for the CPUs to be < 15%% busy before measuring")
    r = sub.add_parser("ratio")
    r.add_argument("file")
    args = parser.parse_args()
    if args.command == "measure":
        sys.exit(asyncio.run(measure(args)))
    ratio(args.file)


if __name__ == "__main__":
    main()

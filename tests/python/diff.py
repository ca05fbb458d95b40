"""Compare two answers files written by compare.py.

    python diff.py official.json mostrador.json [--allow allow.txt] [--max-value 300]

Prints every difference as `path: <left> != <right>`. A path is the top-level
key followed by the keys / list indexes inside it, joined with "/", e.g.
`agent/stream/values/3/1/messages/0/content`. A missing value is shown as
<missing>; lists of different lengths report their extra items one by one.

--allow FILE: one path glob per line (fnmatch syntax: * matches anything,
including "/"), optionally followed by `# reason`; blank lines and lines
starting with # are ignored. Matching differences are still printed, marked
"(allowed)". Exit status: 1 if any difference is not allowed, else 0.
Allow-list entries that matched nothing are reported as stale (no effect on
the exit status).
"""

import argparse
import fnmatch
import json
import sys
from typing import Any

MISSING = object()


def load_allow(path: str) -> list[tuple[str, str]]:
    rules = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            pattern, _, reason = line.partition("#")
            rules.append((pattern.strip(), reason.strip()))
    return rules


def walk(left: Any, right: Any, path: str, out: list[tuple[str, Any, Any]]) -> None:
    if isinstance(left, dict) and isinstance(right, dict):
        for key in list(left) + [k for k in right if k not in left]:
            walk(left.get(key, MISSING), right.get(key, MISSING), f"{path}/{key}" if path else str(key), out)
        return
    if isinstance(left, list) and isinstance(right, list):
        for i in range(max(len(left), len(right))):
            walk(
                left[i] if i < len(left) else MISSING,
                right[i] if i < len(right) else MISSING,
                f"{path}/{i}",
                out,
            )
        return
    if left is MISSING and right is MISSING:
        return
    # Keep bool/int/float distinct (json: true != 1, 1 != 1.0).
    if type(left) is not type(right) or left != right:
        out.append((path, left, right))


def show(value: Any, limit: int) -> str:
    if value is MISSING:
        return "<missing>"
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("left")
    parser.add_argument("right")
    parser.add_argument("--allow", help="allow-list file of path globs")
    parser.add_argument("--max-value", type=int, default=300, help="truncate shown values to N characters")
    args = parser.parse_args()
    with open(args.left) as f:
        left = json.load(f)
    with open(args.right) as f:
        right = json.load(f)
    rules = load_allow(args.allow) if args.allow else []
    used = [0] * len(rules)

    diffs: list[tuple[str, Any, Any]] = []
    walk(left, right, "", diffs)
    failing = 0
    for path, a, b in diffs:
        allowed = None
        for i, (pattern, reason) in enumerate(rules):
            if fnmatch.fnmatchcase(path, pattern):
                used[i] += 1
                allowed = reason or pattern
                break
        mark = f"  (allowed: {allowed})" if allowed is not None else ""
        if allowed is None:
            failing += 1
        print(f"{path}: {show(a, args.max_value)} != {show(b, args.max_value)}{mark}")
    sys.stdout.flush()
    for (pattern, _), n in zip(rules, used):
        if n == 0:
            print(f"stale allow rule (matched nothing): {pattern}", file=sys.stderr)
    print(
        f"{len(diffs)} differences, {len(diffs) - failing} allowed, {failing} not allowed",
        file=sys.stderr,
    )
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())

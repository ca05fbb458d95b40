"""Medians of drive.py's JSON lines (as run.sh writes them), per server, graph and workload, and
mostrador's ratios to Aegra on the Python graph: of the medians, and rep by rep (the two servers
of one rep ran minutes apart, so their ratio suffers less from a machine that got busier).

    summarize.py RESULTS.jsonl [--max-outside PCT]   # markdown on stdout

--max-outside leaves out measurements during which other work used more than PCT % of the
machine's CPU (`outside_cpu_pct`), and says how many.
"""

import collections
import json
import statistics
import sys

THROUGHPUT = ("runs_per_s", "run_p50_ms", "server_cpu_ms_per_run", "pg_db_cpu_ms_per_run",
              "commits_per_run", "outside_cpu_pct")
PICKUP = ("p50_ms", "p99_ms", "end_p50_ms", "outside_cpu_pct")


def fmt(values):
    values = [v for v in values if v is not None]
    if not values:
        return "–"
    median = statistics.median(values)
    return f"**{median:g}** [{', '.join(f'{v:g}' for v in values)}]"


def main():
    rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
    if "--max-outside" in sys.argv:
        limit = float(sys.argv[sys.argv.index("--max-outside") + 1])
        kept = [r for r in rows if r.get("outside_cpu_pct", 0) <= limit]
        print(f"{len(rows) - len(kept)} of {len(rows)} measurements left out "
              f"(other work above {limit:g} % of the CPU)")
        rows = kept
    groups = collections.defaultdict(list)
    for row in rows:
        groups[(row["workload"], row["server"], row["graph"])].append(row)
    medians = {}
    for workload, columns in (("throughput", THROUGHPUT), ("pickup", PICKUP)):
        print(f"\n### {workload} (median **bold**, then each rep)\n")
        print("| server | graph | n | " + " | ".join(columns) + " | bad |")
        print("|---|---|---|" + "---|" * len(columns) + "---|")
        for (w, server, graph), group in sorted(groups.items()):
            if w != workload:
                continue
            cells = [fmt([r.get(c) for r in group]) for c in columns]
            bad = sum(r.get("wrong_results", 0) + r.get("bad_runs", 0) for r in group)
            print(f"| {server} | {graph} | {len(group)} | " + " | ".join(cells) + f" | {bad} |")
            for c in columns:
                values = [r.get(c) for r in group if r.get(c) is not None]
                if values:
                    medians[(workload, server, graph, c)] = statistics.median(values)
    by_rep = collections.defaultdict(dict)
    for row in rows:
        if row["graph"] == "linear6" and row["server"] in ("mostrador", "aegra"):
            value = row.get("runs_per_s") if row["workload"] == "throughput" else row.get("p50_ms")
            by_rep[(row["workload"], row["rep"])][row["server"]] = value
    print()
    for workload, what in (("throughput", "runs/s"), ("pickup", "pickup p50")):
        ratios = [
            pair["mostrador"] / pair["aegra"]
            for (w, _), pair in sorted(by_rep.items())
            if w == workload and pair.get("mostrador") and pair.get("aegra")
        ]
        if ratios:
            print(f"{what}, mostrador / Aegra rep by rep: "
                  + ", ".join(f"{r:.2f}" for r in ratios)
                  + f" (median {statistics.median(ratios):.2f})")
    m_rate = medians.get(("throughput", "mostrador", "linear6", "runs_per_s"))
    a_rate = medians.get(("throughput", "aegra", "linear6", "runs_per_s"))
    m_pick = medians.get(("pickup", "mostrador", "linear6", "p50_ms"))
    a_pick = medians.get(("pickup", "aegra", "linear6", "p50_ms"))
    print()
    if m_rate and a_rate:
        verdict = "met" if m_rate >= 3 * a_rate else "NOT met"
        print(f"runs/s, mostrador / Aegra (Python linear6): {m_rate / a_rate:.2f}x "
              f"(target >= 3x: {verdict})")
    if m_pick and a_pick:
        verdict = "met" if m_pick <= a_pick / 2 else "NOT met"
        print(f"pickup p50, mostrador / Aegra (Python linear6): {m_pick / a_pick:.2f} "
              f"(target <= 0.5: {verdict})")


if __name__ == "__main__":
    main()

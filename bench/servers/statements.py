"""Statements and commits per run, from PostgreSQL's log with `log_min_duration_statement = 0`
set on one database (`alter database ... set ...`: other databases log nothing more).

    statements.py LOG DATABASE SINCE RUNS [UNTIL]

LOG is the server log (or the part of it to read), SINCE / UNTIL are log timestamps
("2026-12-01 12:38:38.305") bounding the window the RUNS were executed in. Prepared statements are
named per connection, so their text is read from each connection's `parse` lines (which may come
before SINCE). Prints, per statement (its first meaningful line), executions per run and the mean
duration, then commits per run.
"""

import collections
import re
import sys

ENTRY = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+) UTC \[(\d+)\] (\S*)@(\S*) (\w+):  (.*)$")
DURATION = re.compile(r"duration: ([\d.]+) ms  (parse|bind|execute) ([^:]+):(.*)$")
SIMPLE = re.compile(r"duration: ([\d.]+) ms  statement: (.*)$")


def entries(path, database):
    current = None
    with open(path, errors="replace") as f:
        for line in f:
            m = ENTRY.match(line)
            if m:
                if current:
                    yield current
                ts, pid, _user, db, level, text = m.groups()
                current = (ts, pid, db, level, [text]) if db == database else None
            elif current is not None and line.startswith(("\t", " ")):
                current[4].append(line.strip())
    if current:
        yield current


def summary(text_lines):
    """The statement's first words, and the names of its CTEs (which tell fenced writes apart)."""
    text = " ".join(" ".join(text_lines).split())
    ctes = re.findall(r"(\w+) as \(", text)
    head = text[:70]
    return f"{head} [{', '.join(ctes)}]" if len(ctes) > 1 else head


def main():
    path, database, since, runs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    until = sys.argv[5] if len(sys.argv) > 5 else "9999"
    names = {}
    counts = collections.Counter()
    durations = collections.defaultdict(float)
    for ts, pid, _db, level, lines in entries(path, database):
        if level != "LOG":
            continue
        first = lines[0]
        m = DURATION.search(first)
        if m:
            ms, phase, name, rest = m.groups()
            if phase == "parse":
                names[(pid, name)] = summary([rest, *lines[1:]])
            if phase == "execute" and since <= ts <= until:
                key = names.get((pid, name), name)
                counts[key] += 1
                durations[key] += float(ms)
            continue
        m = SIMPLE.search(first)
        if m and since <= ts <= until:
            ms, text = m.groups()
            key = summary([text, *lines[1:]])
            counts[key] += 1
            durations[key] += float(ms)
    total = sum(counts.values())
    print(f"{total / runs:.1f} statements per run ({runs} runs)")
    for key, n in counts.most_common():
        print(f"{n / runs:7.2f}/run  {durations[key] / n:6.3f} ms  {key}")
    commits = sum(n for key, n in counts.items() if key.upper().startswith("COMMIT"))
    print(f"explicit COMMITs per run: {commits / runs:.2f}")


if __name__ == "__main__":
    main()

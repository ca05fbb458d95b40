"""One pgbench measure: transactions per second and PostgreSQL's CPU per transaction (every
process of the cluster, as bench/servers/drive.py counts it).

    measure.py SCRIPT CLIENTS SECONDS DATABASE
"""

import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "servers"))
import drive  # noqa: E402

script, clients, seconds, database = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
before = drive.cpu_sample(0, None)
out = subprocess.run(
    ["pgbench", "-n", f"-c{clients}", f"-j{min(clients, 2)}", f"-T{seconds}", "-M", "prepared",
     "-f", script, database],
    capture_output=True, text=True, check=True,
).stdout
after = drive.cpu_sample(0, None)
done = int(re.search(r"number of transactions actually processed: (\d+)", out).group(1))
tps = float(re.search(r"tps = ([\d.]+)", out).group(1))
pg_ms = 1000 * drive.cpu_used(before, after)["cpu_pg_s"] / done
print(f"{Path(script).stem:<10} {clients:>2} clients: {tps:>7.0f} transactions/s, PostgreSQL CPU {pg_ms:.3f} ms each")

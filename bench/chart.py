"""Draws bench/results/latest.png from latest.csv: catch-up throughput and peak RSS per contender."""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

rows = list(csv.DictReader(open(sys.argv[1])))
names = [r["contender"] for r in rows]
fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
left.bar(names, [float(r["records_per_s"]) for r in rows], color="#3b7dd8")
left.set_title("catch-up throughput (records/s, higher is better)")
right.bar(names, [float(r["peak_rss_mb"]) for r in rows], color="#d8743b")
right.set_title("peak RSS (MB, lower is better)")
for ax in (left, right):
    ax.tick_params(axis="x", rotation=20)
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=100)

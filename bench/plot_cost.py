"""Plot cost per request against cluster size: our core, our engine, and BookKeeper's Java reference points.

Re-run from the repository root (matplotlib is a benchmark-only tool, not a project dependency):

    .venv/bin/pip install matplotlib
    .venv/bin/python bench/bench_growth.py --parts bookies --json /tmp/growth.json
    .venv/bin/python bench/plot_cost.py --growth /tmp/growth.json [--replay /tmp/replay.json] \\
        --out docs/cost_per_request.png

Series (microseconds per request, log-log against bookies in the cluster):

* ours, placement core: rack-aware new_ensemble(3,3,2), unweighted, one shared generator, CPU time
  (bench_growth.py part `bookies`; the set-up of the Java figures);
* ours, engine without Spark: the whole per-request work of the state function (parse, model, policy
  call with the production switches, decision JSON), CPU time;
* ours, through Spark (optional, --replay): wall time per record of `placement-engine replay`
  (bench_replay.py), and CPU time per record of the whole process tree;
* BookKeeper's Java RackawareEnsemblePlacementPolicy newEnsemble(3,3,2), the reference figures in `JAVA`
  (calls/s at 12 bookies on 4 racks and at 600 on 30 racks), drawn as ranges; and the project's targets
  in `TARGETS` as ceilings.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

JAVA = ((12, 500_000, 550_000), (600, 14_000, 16_000))  # (bookies, low calls/s, high calls/s)
TARGETS = ((12, 100_000), (600, 20_000))                 # (bookies, calls/s at least)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--growth", required=True, help="JSON written by bench_growth.py --json (part bookies)")
    parser.add_argument("--replay", help="JSON written by bench_replay.py --json (adds the through-Spark points)")
    parser.add_argument("--out", default="docs/cost_per_request.png")
    args = parser.parse_args(argv)
    try:
        import matplotlib
    except ImportError:
        raise SystemExit("plot_cost.py needs matplotlib, a benchmark-only tool: "
                         ".venv/bin/pip install matplotlib") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    growth = json.loads(Path(args.growth).read_text())
    rows = growth.get("bookies")
    if not rows:
        raise SystemExit(f"{args.growth} has no 'bookies' part; run bench_growth.py --parts bookies --json FILE")
    bookies = [r["bookies"] for r in rows]
    labels = {r["bookies"]: f"{r['bookies']}/{r['racks']}" for r in rows}

    fig, ax = plt.subplots(figsize=(8.5, 7.0), dpi=110)
    ax.plot(bookies, [r["core_us_per_call"] for r in rows], "o-", color="tab:blue",
            label="ours: placement core, new_ensemble(3,3,2), CPU time")
    ax.plot(bookies, [r["engine_us_per_request"] for r in rows], "s-", color="tab:green",
            label="ours: engine per request without Spark\n(parse, model, policy, decision JSON), CPU time")
    if args.replay:
        replay = json.loads(Path(args.replay).read_text())
        size = replay["args"]["bookies"]
        run = replay.get("replay")
        if run:
            ax.plot([size], [run["wall_s"] / run["records"] * 1e6], "v", color="tab:red", markersize=9,
                    label=f"ours: placement-engine replay, wall time per record\n"
                          f"(load avg {run['load_during'][0][0]:.1f}-{run['load_during'][1][0]:.1f} on 2 cores)")
            if run.get("cpu_s"):
                ax.plot([size], [run["cpu_s"] / run["records"] * 1e6], "^", color="tab:orange", markersize=9,
                        label="ours: placement-engine replay, CPU time per record\n(driver + JVM + Python workers)")
    for n, (size, low, high) in enumerate(JAVA):
        mid = 1e6 / ((low + high) / 2)
        ax.errorbar([size], [mid], yerr=[[mid - 1e6 / high], [1e6 / low - mid]],
                    fmt="D", color="black", capsize=5, markersize=7,
                    label="BookKeeper Java newEnsemble(3,3,2), rack-aware\n(reference figures)" if n == 0 else None)
        ax.annotate(f"Java {low / 1000:g}-{high / 1000:g} k/s", (size, mid), textcoords="offset points",
                    xytext=(8, -4), fontsize=8)
    for n, (size, rate) in enumerate(TARGETS):
        ax.plot([size], [1e6 / rate], "_", color="tab:purple", markersize=22, markeredgewidth=2,
                label="target (cost at most)" if n == 0 else None)
    for r in rows:
        ax.annotate(f"{1e6 / r['core_us_per_call'] / 1000:,.0f} k/s", (r["bookies"], r["core_us_per_call"]),
                    textcoords="offset points", xytext=(-10, -14), fontsize=7, color="tab:blue")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(bookies)
    ax.set_xticklabels([labels[b] for b in bookies])
    ax.set_xlabel("cluster size: bookies / racks")
    ax.set_ylabel("cost per request (microseconds, log scale)")
    machine = growth.get("machine", {})
    ax.set_title(f"Cost per request vs cluster size\n{machine.get('cpus', '?')} CPUs ({machine.get('cpu', '?')}), "
                 f"Python {machine.get('python', '?')}, shared machine (load avg "
                 f"{machine.get('load_before', ['?'])[0]} before)", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    handles, names = ax.get_legend_handles_labels()
    fig.tight_layout(rect=(0, 0.2, 1, 1))
    fig.legend(handles, names, fontsize=7.5, loc="lower center", ncol=2, frameon=False)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

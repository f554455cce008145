"""How long ``harmonic-monitor report`` takes on a long event log: the demo's model and labelled reference, and
``--events`` demo events (three phases: stationary, input shift, harmful shift) as a ``.jsonl`` log.

Times the whole :func:`monitor.offline.report.build_report` (read and decode the log, replay it through the ``run``
pipeline, which scores every event, in micro-batches of ``--replay-batch`` events; drift, accuracy estimate, probes,
the page). Prints one JSON object; ``uptime``'s load average beside it says how busy the machine was.

Usage (the command behind docs/BENCHMARKS.md, "Report page on a 50,000-event log")::

    .venv/bin/python bench/report_time.py --events 50000 [--max-events N] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from monitor.cli.demo_data import PHASES, build_demo


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, default=50000)
    p.add_argument("--max-events", type=int, default=None)
    p.add_argument("--workdir", default=None)
    p.add_argument("--replay-batch", type=int, default=100)
    args = p.parse_args()
    root = Path(args.workdir or tempfile.mkdtemp(prefix="report-bench-"))
    demo = build_demo(root / "demo", events=args.events, seed=0)
    events = root / "events.jsonl"
    events.write_bytes(b"\n".join(line for phase in PHASES for line in demo.phases[phase]) + b"\n")
    assert demo.labelled_reference_path is not None

    from monitor.offline.report import build_report

    started = time.perf_counter()
    report = build_report(
        demo.model_path,
        demo.labelled_reference_path,
        events,
        out=root / "report.html",
        max_events=args.max_events,
        replay_batch=args.replay_batch,
    )
    total_s = time.perf_counter() - started
    print(
        json.dumps(
            {
                "events": report.data.n_events,
                "cpus": len(os.sched_getaffinity(0)),
                "report_seconds": round(total_s, 1),
                "replay_batch": args.replay_batch,
                "load_average_1min": round(os.getloadavg()[0], 1),
                "events_per_second": round(report.data.n_events / total_s),
                "verdict_changes": 0 if report.data.timeline is None else len(report.data.timeline.changes),
                "page_bytes": len(report.html.encode()),
                "page": str(root / "report.html"),
            }
        )
    )


if __name__ == "__main__":
    main()

"""Per-segment streams for bench/verdict_quality.py: one model, a reference of segments of 150–5,000 rows.

Five inputs N(0, 1), the third shifted per segment (by ``OFFSETS``: segments differ a little, as cities do); the
class is x0 + x1 + 0.5·x2 + N(0, 0.3²) > 0. The model (``--model``, default a GradientBoostingClassifier) is trained on TRAIN rows of every segment;
the labelled reference holds ``SIZES`` rows per segment (``reference --segment-column``: the 150-row segment is
shrunk toward the others, weight 0.75; the rest have their own). The calibration run (CAL_EACH events per segment by default) and
the live run (PRE_EACH then POST_EACH per segment, interleaved) go through ``replay`` with each event's segment.
Only the 150-row segment ``CHANGED`` changes after its PRE_EACH events (``SEGMENT_STREAMS`` says how); the rest stay
as they were. Delays count the changed segment's events; false alarms count every segment's events of the
calibration run and before the change; river's detectors run on the changed segment's max-probability, calibrated on
its calibration events.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from verdict_quality import (
    BATCH,
    FA_PER_10K,
    GRIDS,
    HARMFUL,
    MODELS,
    NOT_STABLE,
    Run,
    _cli,
    _first_after,
    _state_at,
    _verdict_alarms,
    alarms,
    calibrate,
    confidence_is_harm_evidence,
    detector_alarms,
    estimate_quoted,
    replay,
    sweep,
    to_onnx_model,
)

SIZES = {"s150": 150, "s500": 500, "s1500": 1500, "s5000": 5000}
OFFSETS = {"s150": 0.1, "s500": -0.2, "s1500": 0.3, "s5000": 0.0}
CHANGED = "s150"
TRAIN_EACH, CAL_EACH, PRE_EACH, POST_EACH = 1500, 4000, 2500, 2500
#: stream → what happens to the changed segment
SEGMENT_STREAMS = {
    "seg_noise": "per-segment baselines of 150–5,000 rows; the 150-row segment's inputs get N(0, 1) noise "
    "(labels from the clean values)",
    "seg_boundary": "per-segment baselines of 150–5,000 rows; the 150-row segment's events crowd the class boundary",
    "seg_irrelevant": "per-segment baselines of 150–5,000 rows; the 150-row segment's x3 (which the label ignores) "
    "moves by +1.5",
    "seg_stationary": "per-segment baselines of 150–5,000 rows; nothing changes",
}

Rows = tuple[NDArray[np.float64], NDArray[np.int64]]


def draw(
    rng: np.random.Generator, segment: str, n: int, keep: Callable[[NDArray[np.float64]], Any] | None = None
) -> Rows:
    """``n`` rows of ``segment`` (those ``keep`` selects, drawn until there are ``n``) and their classes."""
    xs, ys = [], []
    got = 0
    while got < n:
        x = rng.normal(size=(4 * n, 5))
        x[:, 2] += OFFSETS[segment]
        y = (x[:, 0] + x[:, 1] + 0.5 * x[:, 2] + rng.normal(0.0, 0.3, 4 * n) > 0).astype(np.int64)
        sel = np.ones(4 * n, dtype=bool) if keep is None else keep(x)
        xs.append(x[sel])
        ys.append(y[sel])
        got += int(sel.sum())
    return np.vstack(xs)[:n], np.concatenate(ys)[:n]


def after(key: str, rng: np.random.Generator) -> Rows:
    """The changed segment's POST_EACH events in stream ``key``."""
    if key == "seg_boundary":
        return draw(rng, CHANGED, POST_EACH, lambda x: np.abs(x[:, 0] + x[:, 1] + 0.5 * x[:, 2]) < 0.3)
    x, y = draw(rng, CHANGED, POST_EACH)
    if key == "seg_noise":
        x = x + rng.normal(0.0, 1.0, size=x.shape)
    elif key == "seg_irrelevant":
        x[:, 3] += 1.5
    return x, y


def interleave(parts: dict[str, NDArray[np.float64]]) -> tuple[NDArray[np.float64], list[str]]:
    """The segments' rows one after another in turn (each part the same length)."""
    names = list(parts)
    stacked = np.stack([parts[s] for s in names], axis=1)  # (n, segments, inputs)
    return stacked.reshape(-1, stacked.shape[2]), names * stacked.shape[0]


def run_segments(
    key: str,
    seed: int,
    drift_extra: Sequence[str] = (),
    ours_only: bool = False,
    ours_rate: float | None = None,
    cal: int = len(SIZES) * CAL_EACH,
    family: str = "gbdt",
) -> Run:
    """One per-segment stream × seed (see the module's description); ``cal``: events of the calibration run, all
    segments together; ``family``: the model (``verdict_quality.MODELS``)."""
    cal_each = cal // len(SIZES)

    t0 = time.perf_counter()
    rate = FA_PER_10K * 100 if ours_rate is None else ours_rate
    rng = np.random.default_rng(seed)
    train = [draw(rng, s, TRAIN_EACH) for s in SIZES]
    x_train, y_train = np.vstack([t[0] for t in train]), np.concatenate([t[1] for t in train])
    model = MODELS[family](seed).fit(x_train, y_train)
    ref = {s: draw(rng, s, n) for s, n in SIZES.items()}
    cal_x, cal_seg = interleave({s: draw(rng, s, cal_each)[0] for s in SIZES})
    pre = {s: draw(rng, s, PRE_EACH) for s in SIZES}
    post = {s: after(key, rng) if s == CHANGED else draw(rng, s, POST_EACH) for s in SIZES}
    pre_x, pre_seg = interleave({s: v[0] for s, v in pre.items()})
    post_x, post_seg = interleave({s: v[0] for s, v in post.items()})
    live_x, live_seg = np.vstack([pre_x, post_x]), pre_seg + post_seg
    start = pre_x.shape[0]  # the change's index in the live run
    acc = [float((model.predict(part[CHANGED][0]) == part[CHANGED][1]).mean()) for part in (pre, post)]
    conf = [float(model.predict_proba(part[CHANGED][0]).max(axis=1).mean()) for part in (pre, post)]
    run = Run(key, seed, acc[0], acc[1], conf[0], conf[1], stationary_events=cal_x.shape[0] + start)
    with tempfile.TemporaryDirectory(prefix="verdict-segments-") as name:
        tmp = Path(name)
        model_path = tmp / "model.onnx"
        model_path.write_bytes(to_onnx_model(model, x_train))
        with (tmp / "ref.csv").open("w", encoding="utf-8") as f:
            f.write("x0,x1,x2,x3,x4,segment\n")
            for s, (x, _) in ref.items():
                f.writelines(",".join(f"{v:.6f}" for v in row) + f",{s}\n" for row in x.tolist())
        np.savetxt(tmp / "labels.csv", np.concatenate([y for _, y in ref.values()]), fmt="%d")
        reference = tmp / "reference.json"
        _cli(
            "reference",
            *("--model", str(model_path), "--data", str(tmp / "ref.csv"), "--segment-column", "segment"),
            *("--labels", str(tmp / "labels.csv"), "--out", str(reference)),
        )
        run.confidence_harm = confidence_is_harm_evidence(reference)
        config = tmp / "monitor.yaml"
        config.write_text(
            f"drift:\n  false_alarms_per_million_events: {rate:g}\n"
            + "".join(f"  {line}\n" for line in drift_extra)
            + f"batch:\n  max_events: {BATCH}\n",
            encoding="utf-8",
        )
        cal_tl = replay(tmp, "cal", cal_x, model_path, reference, config, cal_seg)
        live_tl = replay(tmp, "live", live_x, model_path, reference, config, live_seg)
    # the changed segment's own event count at each index of the live run
    own = np.cumsum([s == CHANGED for s in live_seg]) - 1
    changed = {**live_tl, "changes": [c for c in live_tl["changes"] if c["segment"] == CHANGED]}
    for label, harmful_only in ((HARMFUL, True), (NOT_STABLE, False)):
        every = _verdict_alarms(live_tl, harmful_only)
        run.false_alarms[label] = len(_verdict_alarms(cal_tl, harmful_only)) + sum(i < start for i in every)
        mine = [int(own[min(i, own.size - 1)]) for i in _verdict_alarms(changed, harmful_only)]
        state = _state_at(changed, start)
        already = state == "harmful-shift" if harmful_only else state != "stable"
        run.delays[label] = 0.0 if already else _first_after(mine, PRE_EACH)
        if already:  # a false alarm before the change, held through it
            run.held.append(label)
    run.final = _state_at(changed, live_x.shape[0] + 1)
    run.quoted = estimate_quoted([a for a in live_tl["alerts"] if a["segment"] == CHANGED])
    run.fired = next(
        (list(c["detectors"]) for c in changed["changes"] if c["index"] >= start and c["verdict"] == "harmful-shift"),
        [],
    )
    run.detector_alarms = detector_alarms(cal_tl["crossings"], [c for c in live_tl["crossings"] if c["index"] < start])
    if not ours_only:
        cal_conf = model.predict_proba(cal_x[np.asarray(cal_seg) == CHANGED]).max(axis=1)[:, None]
        live_conf = model.predict_proba(live_x[np.asarray(live_seg) == CHANGED]).max(axis=1)[:, None]
        for kind, grid in GRIDS.items():
            label = f"{kind} on max-prob"
            value, cal_alarms = calibrate(kind, grid, cal_conf, seed)
            hits = alarms(kind, value, live_conf, seed)
            run.settings[label] = value
            run.false_alarms[label] = cal_alarms + sum(i < PRE_EACH for i in hits)
            run.delays[label] = _first_after(hits, PRE_EACH)
            run.events_for[label] = cal_each + PRE_EACH  # the changed segment's own stationary events
            run.sweep[label] = sweep(kind, grid, cal_conf, live_conf, PRE_EACH, seed)
    run.seconds = time.perf_counter() - t0
    return run

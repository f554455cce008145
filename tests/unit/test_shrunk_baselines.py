"""Small segments in the reference rows (monitor/rolling/segment_baselines.py: plan_segments): own from 200 rows,
shrunk toward the model-wide rows from 50 (weight N/200), borrowed below, warming up when unlike the other rows; what
the watch, /readyz's baselines and the reference file keep of it."""

from __future__ import annotations

import numpy as np

from monitor.drift.verdict import Verdict
from monitor.rolling.reference import Basis, Reference
from monitor.rolling.segment_baselines import MIN_SEGMENT_ROWS, MIN_SHRUNK_ROWS, plan_segments
from tests.unit.test_watch import Stream, feed, make_watch


def test_each_size_gets_its_basis_and_a_segment_unlike_the_rest_warms_up() -> None:
    rng = np.random.default_rng(4)
    seg = np.array(["big"] * 900 + ["mid"] * 120 + ["low"] * MIN_SHRUNK_ROWS + ["few"] * 49 + ["one"] + ["far"] * 150)
    x = rng.normal(size=(seg.size, 3))
    x[seg == "far", 2] += 2.0  # one input of "far" sits elsewhere
    plan = plan_segments(seg, x, 20, feature_names=["a", "b", "c"])
    assert plan["big"].basis == Basis("own", 900, 1.0) and plan["big"].rows is not None
    assert plan["mid"].basis == Basis("shrunk", 120, 0.6)
    assert plan["low"].basis == Basis("shrunk", MIN_SHRUNK_ROWS, MIN_SHRUNK_ROWS / MIN_SEGMENT_ROWS)
    assert plan["few"].basis.kind == "borrowed" and plan["one"].basis == Basis("borrowed", 1, 0.0)
    assert (
        plan["far"].rows is None and "its inputs differ from the other rows': c KS distance" in plan["far"].describe()
    )
    # a shrunk baseline holds all of the segment's rows, topped up to MIN_SEGMENT_ROWS with rows of other segments
    mixed = plan["mid"].rows
    assert mixed is not None and mixed.size == MIN_SEGMENT_ROWS and np.sum(seg[mixed] == "mid") == 120
    # a borrowed one is every row: the model-wide baseline
    assert plan["one"].rows is not None and np.array_equal(plan["one"].rows, np.arange(seg.size))


def test_a_small_segment_is_shrunk_only_as_far_as_it_stays_like_itself() -> None:
    # the same shift of 0.5 standard deviations: at 190 rows (weight 0.95) the other rows' 5 % moves the baseline
    # little; at 60 rows (weight 0.3) their 70 % would move it past the KS floor's half, so it warms up instead
    rng = np.random.default_rng(2)
    for n, kind in ((190, "shrunk"), (60, "own")):
        seg = np.array(["s"] * n + ["rest"] * 3000)
        x = rng.normal(size=(seg.size, 1))
        x[seg == "s"] += 0.5
        p = plan_segments(seg, x, 20)["s"]
        assert p.basis.kind == kind and (p.rows is None) == (kind == "own")


def test_a_shrunk_and_a_borrowed_segment_are_judged_at_once_and_stay_stable_on_their_usual_traffic() -> None:
    stream = Stream(seed=8)
    _, x, result, _ = stream.batch(n=1400)
    segs = np.array(["a"] * 1200 + ["s"] * 120 + ["t"] * 79 + ["one"])
    watch, _ = make_watch(with_reference=False)
    watch.set_reference(x, result, segs)
    assert watch.baselines.bases["s"] == "shrunk (120 rows, weight 0.60)"
    assert watch.baselines.bases["t"] == "shrunk (79 rows, weight 0.40)"
    assert watch.baselines.bases["one"] == "borrowed (1 row)"
    borrowed = watch.segment_references["one"]
    assert watch.reference is not None and borrowed.n_events == watch.reference.n_events
    for segment in ("s", "t", "one"):
        verdicts = feed(watch, stream, 30, segment=segment)  # 3,000 events of the segment's usual traffic
        assert set(verdicts) == {Verdict.STABLE}, segment
    assert watch.warming_up == {}


def test_the_basis_survives_the_reference_file_and_a_file_without_it_reads_as_own() -> None:
    rng = np.random.default_rng(0)
    ref = Reference.from_arrays(gamma=rng.exponential(size=60), flicker=np.zeros(60), features=rng.normal(size=(60, 2)))
    shrunk = Reference.from_dict({**ref.to_dict(), "basis": Basis("shrunk", 60, 0.3).to_json()})
    assert shrunk.basis == Basis("shrunk", 60, 0.3)
    assert Reference.from_dict(shrunk.to_dict()).basis == shrunk.basis
    old = ref.to_dict()
    del old["basis"]
    assert Reference.from_dict(old).basis is None

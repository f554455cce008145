"""The ``models`` section: one model's file, kind, reference and run options (:class:`ModelSettings`), and how γ and
flicker are scored for it (:class:`ScoringSettings`, its ``scoring`` block)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from monitor.config_fields import StrictSettings


class ScoringSettings(StrictSettings):
    radius: float = Field(0.05, gt=0, description="Ball radius r (standardized units unless space=raw).")
    space: Literal["standardized", "raw"] = Field("standardized", description="Units of radius and sigma.")
    scale: Literal["per_feature", "global", "per_channel"] = Field(
        "per_feature",
        description="How standardized units are fitted: each feature its own mean and scale, one for all features "
        "(images in pixel-value units relative to their spread), or one per image channel (see channel_axis).",
    )
    channel_axis: int = Field(
        1, description="With scale: per_channel, the channel axis of an image input's shape: 1 for NCHW, -1 for NHWC."
    )
    ball: str = Field(
        "auto",
        description="simplex | simplex+anti | rotations:K | hypercube:m | auto (simplex+anti up to 256 features, "
        "hypercube beyond: m = 0.1 % of 2n, at least 16, drawn per event).",
    )
    output: Literal["auto", "proba", "logit", "label", "value"] = Field(
        "auto", description="What f is for γ (auto: proba for classifiers, value for regressors)."
    )
    flicker_copies: int = Field(32, ge=0, description="Gaussian copies per event (K); 0 turns flicker off.")
    sigma: float = Field(0.05, gt=0, description="Flicker noise scale σ.")
    scales: Literal["fixed", "from_reference"] = Field(
        "from_reference",
        description="from_reference: score at the σ and r a reference JSON records (built with `reference --scales "
        "from-reference`: σ at which a stated share of reference events flickers, r = σ); a reference that records "
        "none (a CSV, a warm-up, a JSON built at fixed scales) scores at radius and sigma. radius or sigma set here "
        "explicitly win over the recorded ones. fixed: always radius and sigma. (`reference --scales` defaults to fixed: "
        "a reference chooses its scales only when asked.)",
    )
    steps: int = Field(
        25,
        ge=0,
        description="N in P_adj = P·exp(−N·γ_logit). Not the N of `probe --steps` (Algorithm 2's steps per point).",
    )
    seed: int = Field(0, description="Seeds ball rotations/samples and flicker noise.")
    regression_tolerance: float = Field(
        0.1,
        gt=0,
        description="Regressor flicker: a copy flips when its output moves by more than this fraction of the output's "
        "reference IQR (harmonic_flicker_tolerance gives it in output units; docs/SPEC-NOTES.md).",
    )


class ModelSettings(StrictSettings):
    name: str = Field(..., min_length=1, description="Model name as it appears in events' `model` field.")
    path: Path = Field(..., description="The ONNX file.")
    model_kind: Literal["auto", "classifier", "regressor"] = Field(
        "auto",
        description="Classifier or regressor: auto decides from the graph (Softmax, ArgMax, label output, ZipMap; "
        "the load log says what it decided and why); set it when a float [N, C] output holds logits the graph "
        "does not mark.",
    )
    fixed_features: list[str] = Field(
        default_factory=list,
        description="Float features held fixed like int and string inputs (copied unchanged to every ball point, "
        "noise copy and probe row): element names (x[3]) or input names (all their elements). For one-hot columns "
        "and counts stored as float. See docs/MODELS.md.",
    )
    version: str = Field("", description="Label model_version when events carry none.")
    reference: Path | None = Field(
        None,
        description="A reference JSON built by `harmonic-monitor reference` (recommended: scales, baselines, "
        "category tables), or reference rows (.csv/.npy/.npz); else a warm-up window.",
    )
    feature_names: tuple[str, ...] | None = Field(None, description="Order for events whose features are a map.")
    reference_header: Literal["auto", "yes", "no"] = Field(
        "auto",
        description="Is the first row of a CSV reference a header? auto: when it is not the same kind as the rows "
        "below it (names above numbers, or column numbers above fractional rows); yes: always; no: never.",
    )
    warmup_events: int = Field(2000, ge=10, description="Warm-up window size when no reference is given.")
    providers: tuple[str, ...] = Field(
        ("cpu",),
        description="onnxruntime execution providers, in order: cpu, cuda, tensorrt or full provider names; CPU is "
        "always appended as the fallback ([cuda, cpu] runs on CPU with one warning without onnxruntime-gpu).",
    )
    threads: int = Field(
        0,
        ge=0,
        description="onnxruntime intra-op threads (0 = onnxruntime's default, capped by the container's cgroup CPU "
        "quota; the offline commands at 0: each run cut into slices run by a thread per CPU, one intra-op thread each).",
    )
    max_rows_per_run: int = Field(16384, ge=1, description="Rows per session.run chunk (16384 measured best).")
    rows_in_graph: bool = Field(
        True,
        description="Let onnxruntime build the ball points and flicker copies (a wrapped copy of the graph, checked "
        "against the model at load); false builds them in numpy (slower; for graphs the wrapper mishandles).",
    )
    scoring: ScoringSettings = Field(
        default_factory=ScoringSettings, description="How γ and flicker are scored for this model."
    )
    compare_with: str | None = Field(
        None,
        description="Make this model a candidate beside the named model (the one it would replace): scored on that "
        "model's sampled events (one draw, both models; the sampling budget counts both), at its scales, never "
        "served; exports paired differences and harmonic_compare_verdict (docs/COMPARE.md). Same inputs, kind and "
        "classes as the named model.",
    )

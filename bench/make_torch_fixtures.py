"""Build the torch-exported fixtures under ``tests/fixtures/torch/``: one small CNN on scikit-learn's 8×8 digits,
exported the ways torch exports it today.

torch is not a dependency of this project (its wheels are several GB): run this in a venv of its own::

    python3 -m venv /tmp/torchvenv
    /tmp/torchvenv/bin/pip install torch==2.13.0 onnxscript onnx numpy scikit-learn
    /tmp/torchvenv/bin/python bench/make_torch_fixtures.py            # writes tests/fixtures/torch/

What it writes (the same trained weights in each):

- ``cnn_dynamo.onnx`` + ``cnn_dynamo.onnx.data``: torch's default ``torch.onnx.export(..., dynamo=True)`` of a batch
  of one: the weights in an external data file beside the model, the batch fixed at 1, ``view`` written as
  ``Reshape`` with ``allowzero=1`` and the target ``[1, -1]`` as an initializer;
- ``cnn_legacy.onnx``: ``dynamo=False`` with a dynamic batch (the older exporter: free batch, weights inside);
- ``cnn_dynamo_fp16.onnx`` (+ ``.data``): the network in half precision (``model.half()``), float16 input and
  output, exported the default way;
- ``gru_dynamo.onnx`` (+ ``.data``): a GRU reading each digit as 8 rows of 8 pixels (``[1, 8, 8]``, batch first),
  default export: its initial state a constant ``[1, 1, 16]`` of zeros and its output reshaped sequence-first to
  ``[8, 1, 16]`` — the batch fixed at position 1;
- ``VERSIONS``: the torch, onnx and onnxscript versions that wrote them.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=Path("tests/fixtures/torch"))
    p.add_argument("--epochs", type=int, default=60)
    args = p.parse_args(argv)
    import onnx
    import onnxscript  # type: ignore[import-not-found, unused-ignore]
    import torch  # type: ignore[import-not-found, unused-ignore]
    from sklearn.datasets import load_digits

    torch.manual_seed(0)
    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)[:, None, :, :]
    y = digits.target.astype(np.int64)
    model = _cnn(torch)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    for _ in range(args.epochs):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model.logits(xt), yt)
        loss.backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        accuracy = float((model.logits(xt).argmax(1) == yt).float().mean())
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    for stale in [*out.glob("*.onnx"), *out.glob("*.onnx.data")]:
        stale.unlink()
    one = xt[:1]
    torch.onnx.export(model, (one,), str(out / "cnn_dynamo.onnx"), dynamo=True, input_names=["image"])
    torch.onnx.export(
        model,
        (one,),
        str(out / "cnn_legacy.onnx"),
        dynamo=False,
        input_names=["image"],
        output_names=["proba"],
        dynamic_axes={"image": {0: "batch"}, "proba": {0: "batch"}},
    )
    half = _cnn(torch)
    half.load_state_dict(model.state_dict())
    half = half.half().eval()
    torch.onnx.export(half, (one.half(),), str(out / "cnn_dynamo_fp16.onnx"), dynamo=True, input_names=["image"])
    gru = _gru(torch)
    opt = torch.optim.Adam(gru.parameters(), lr=0.01)
    rows = xt[:, 0]
    for _ in range(args.epochs):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(gru.logits(rows), yt).backward()
        opt.step()
    gru.eval()
    torch.onnx.export(gru, (rows[:1],), str(out / "gru_dynamo.onnx"), dynamo=True, input_names=["rows"])
    (out / "VERSIONS").write_text(
        f"torch {torch.__version__}\nonnx {onnx.__version__}\nonnxscript {onnxscript.__version__}\n"
        f"training accuracy {accuracy:.3f} ({args.epochs} full-batch Adam epochs, seed 0)\n"
    )
    for f in sorted(out.iterdir()):
        print(f"{f}  {f.stat().st_size} bytes")
    return 0


def _cnn(torch: Any) -> Any:
    """Conv 1→4 3×3, ReLU, 2×2 max-pool, flatten with ``view`` (64 values), linear 64→10, softmax."""
    nn = torch.nn

    class Cnn(nn.Module):  # type: ignore[misc, name-defined, unused-ignore]
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(1, 4, 3, padding=1)
            self.fc = nn.Linear(64, 10)

        def logits(self, x: Any) -> Any:
            h = torch.nn.functional.max_pool2d(torch.relu(self.conv(x)), 2)
            return self.fc(h.view(h.shape[0], -1))

        def forward(self, x: Any) -> Any:
            return torch.softmax(self.logits(x), dim=1)

    return Cnn()


def _gru(torch: Any) -> Any:
    """GRU 8→16 over the 8 rows of a digit, linear 16→10 on the last step, softmax."""
    nn = torch.nn

    class Gru(nn.Module):  # type: ignore[misc, name-defined, unused-ignore]
        def __init__(self) -> None:
            super().__init__()
            self.gru = nn.GRU(8, 16, batch_first=True)
            self.fc = nn.Linear(16, 10)

        def logits(self, x: Any) -> Any:
            out, _ = self.gru(x)
            return self.fc(out[:, -1])

        def forward(self, x: Any) -> Any:
            return torch.softmax(self.logits(x), dim=1)

    return Gru()


if __name__ == "__main__":
    raise SystemExit(main())

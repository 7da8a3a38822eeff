"""Evaluate the checkpoint written by ``train_ddp.py`` on the held-out split.

Writes ``<out>/eval.json`` and prints the same metrics as one line, ``EVAL {...json...}``, so a downstream
task can pick the result up from the job's log as well as from the shared volume.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch
from train_ddp import build_model


def evaluate(data_dir: Path, model_dir: Path) -> dict[str, float]:
    checkpoint = torch.load(model_dir / "model.pt", weights_only=True)
    model = build_model(checkpoint["config"]["features"], checkpoint["config"]["hidden"])
    model.load_state_dict(checkpoint["state_dict"])
    model.eval()
    test = np.load(data_dir / "test.npz")
    x, y = torch.from_numpy(test["x"]), torch.from_numpy(test["y"])
    with torch.no_grad():
        pred = model(x)
    mse = float(torch.mean((pred - y) ** 2))
    variance = float(torch.var(y, unbiased=False))
    return {"test_mse": mse, "test_r2": 1.0 - mse / variance, "test_samples": len(x)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", required=True, help="directory holding test.npz")
    parser.add_argument("--model", required=True, help="directory holding model.pt")
    parser.add_argument("--out", required=True, help="directory for eval.json")
    args = parser.parse_args(argv)

    metrics = evaluate(Path(args.data), Path(args.model))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "eval.json").write_text(json.dumps(metrics, indent=2))
    print("EVAL " + json.dumps(metrics), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

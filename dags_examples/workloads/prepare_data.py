"""Write a small synthetic regression data set (deterministic for a given seed) for the example pipeline.

The target is a linear plus a periodic function of the features, plus noise: a tiny MLP learns the linear
part in the first epoch and keeps improving on the rest, so the loss visibly falls within a few epochs.
Output: ``<out>/train.npz`` and ``<out>/test.npz`` with
float32 arrays ``x`` (n, features) and ``y`` (n, 1).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np


def make_dataset(samples: int, features: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(samples, features)).astype(np.float32)
    w, v = rng.normal(size=(2, features, 1)).astype(np.float32) / np.sqrt(features)
    y = x @ w + np.sin(2.0 * x @ v) + 0.05 * rng.normal(size=(samples, 1))
    return x, y.astype(np.float32)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", required=True, help="directory to write train.npz and test.npz to")
    parser.add_argument("--samples", type=int, default=4096)
    parser.add_argument("--features", type=int, default=16)
    parser.add_argument("--test-fraction", type=float, default=0.2)
    parser.add_argument("--seed", type=int, default=20240601)
    args = parser.parse_args(argv)

    x, y = make_dataset(args.samples, args.features, args.seed)
    n_test = int(args.samples * args.test_fraction)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    np.savez(out / "train.npz", x=x[n_test:], y=y[n_test:])
    np.savez(out / "test.npz", x=x[:n_test], y=y[:n_test])
    summary = {"out": str(out), "train": len(x) - n_test, "test": n_test, "features": args.features}
    print("DATASET " + json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

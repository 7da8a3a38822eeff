"""``python -m t9k_provider.local.console --kubeconfig STATE/kubeconfig --state-dir STATE [--port N]``: the
console's process, which ``t9k-local run`` starts beside its other components."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path

from t9k_provider.local.console.server import run_until_signalled


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m t9k_provider.local.console", description=__doc__)
    parser.add_argument("--kubeconfig", type=Path, required=True, help="the cluster's kubeconfig")
    parser.add_argument("--state-dir", type=Path, required=True, help="where console.json is written")
    parser.add_argument("--port", type=int, default=None, help="port on 127.0.0.1 (default: the last one)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    asyncio.run(run_until_signalled(args.kubeconfig, args.state_dir, args.port))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The BeamJob example's submit container: show the Flink cluster it was given, then run Beam's word count.

``FLINK_MASTER`` (set by the T9k controller) is the JobManager's REST endpoint; printing its ``/overview``
shows that the pod reaches the cluster before the pipeline starts. Every argument (``--input``, ``--output``,
``--runner``, the ``--flink_master`` the controller appends, ...) goes to ``apache_beam.examples.wordcount``.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.request
from typing import Any


def flink_overview(master: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://{master}/overview", timeout=30) as response:
        return json.load(response)


def main(argv: list[str]) -> int:
    master = os.environ["FLINK_MASTER"]
    info = flink_overview(master)
    print(
        f"flink cluster at {master}: Flink {info['flink-version']}, {info['taskmanagers']} taskmanager(s), "
        f"{info['slots-total']} slot(s)",
        flush=True,
    )
    from apache_beam.examples import wordcount

    wordcount.run(argv)
    print("wordcount pipeline finished", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

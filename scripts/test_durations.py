"""Where the suite's time goes: a Markdown table of seconds per test module from pytest's JUnit XML
(``pytest --junitxml=FILE``; a test's time there is its setup, call and teardown, so a module's shared
cluster counts in it), grouped by folder, with an earlier run beside it when given. ``--save`` writes
AFTER's seconds by module file to ``tests/durations.json``, the order modules start in
(`tests.support.schedule`).

    python scripts/test_durations.py AFTER.xml [BEFORE.xml] [--top N] [--save]
"""

from __future__ import annotations

import argparse
import json
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

DURATIONS = Path(__file__).resolve().parents[1] / "tests" / "durations.json"


def seconds_by_module(junit: Path) -> dict[str, tuple[float, int]]:
    """(seconds, tests) per module, by its dotted path without the ``tests.`` prefix."""
    totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for case in ET.parse(junit).getroot().iter("testcase"):
        module = (case.get("classname") or "?").removeprefix("tests.")
        totals[module][0] += float(case.get("time") or 0)
        totals[module][1] += 1
    return {module: (t, int(n)) for module, (t, n) in totals.items()}


def folder(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2] if parts[0] == "local" and len(parts) > 2 else parts[:1])


def table(after: dict[str, tuple[float, int]], before: dict[str, tuple[float, int]], top: int) -> str:
    """Folders, then the ``top`` slowest modules; seconds and test counts, before and after."""

    def grouped(data: dict[str, tuple[float, int]]) -> dict[str, tuple[float, int]]:
        out: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
        for module, (t, n) in data.items():
            out[folder(module)][0] += t
            out[folder(module)][1] += n
        return {k: (t, int(n)) for k, (t, n) in out.items()}

    def rows(a: dict[str, tuple[float, int]], b: dict[str, tuple[float, int]], names: list[str]) -> list[str]:
        lines = []
        for name in names:
            t_a, n_a = a.get(name, (0.0, 0))
            t_b, n_b = b.get(name, (0.0, 0))
            lines.append(
                f"| `{name}` | {t_b:.0f} s ({n_b}) | {t_a:.0f} s ({n_a}) |"
                if b
                else f"| `{name}` | {t_a:.0f} s ({n_a}) |"
            )
        return lines

    head = (
        "| where | before: seconds (tests) | after: seconds (tests) |\n|---|---:|---:|"
        if before
        else ("| where | seconds (tests) |\n|---|---:|")
    )
    ga, gb = grouped(after), grouped(before)
    folders = sorted(set(ga) | set(gb), key=lambda k: -max(ga.get(k, (0, 0))[0], gb.get(k, (0, 0))[0]))
    both = {**before, **after}
    slowest = sorted(both, key=lambda k: -max(after.get(k, (0, 0))[0], before.get(k, (0, 0))[0]))[:top]
    total_a = (sum(t for t, _ in after.values()), sum(n for _, n in after.values()))
    total_b = (sum(t for t, _ in before.values()), sum(n for _, n in before.values()))
    lines = [head, *rows(ga, gb, folders)]
    lines.append(
        f"| **all** | {total_b[0]:.0f} s ({total_b[1]}) | {total_a[0]:.0f} s ({total_a[1]}) |"
        if before
        else f"| **all** | {total_a[0]:.0f} s ({total_a[1]}) |"
    )
    lines += ["", head, *rows(after, before, slowest)]
    return "\n".join(lines)


def renamed(before: dict[str, tuple[float, int]], after: dict[str, tuple[float, int]]) -> dict:
    """``before`` under ``after``'s module names where a module moved to another folder: one that is gone is
    known by its file name, where exactly one module of ``after`` has it (two folders may hold a file of the
    same name, as both hold a ``test_queues_on_cluster.py``)."""
    files: dict[str, list[str]] = defaultdict(list)
    for module in after:
        files[module.rsplit(".", 1)[-1]].append(module)

    def name(module: str) -> str:
        same = files.get(module.rsplit(".", 1)[-1], [])
        return same[0] if module not in after and len(same) == 1 else module

    return {name(module): value for module, value in before.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("after", type=Path)
    parser.add_argument("before", type=Path, nargs="?")
    parser.add_argument("--top", type=int, default=15, help="how many of the slowest modules to list")
    parser.add_argument("--save", action="store_true", help="write AFTER's seconds to tests/durations.json")
    args = parser.parse_args()
    after = seconds_by_module(args.after)
    if args.save:
        by_file = {f"tests/{m.replace('.', '/')}.py": round(t, 1) for m, (t, _) in sorted(after.items())}
        DURATIONS.write_text(json.dumps(by_file, indent=0, sort_keys=True) + "\n")
    before = renamed(seconds_by_module(args.before), after) if args.before else {}
    print(table(after, before, args.top))


if __name__ == "__main__":
    main()

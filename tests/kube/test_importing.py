"""``collector_spared``: the first import of a module runs without the collector and what the process holds
is frozen after it; a later one, or a process that turned the collector off itself, is left as it is. Each
case runs in a fresh interpreter, as freezing is process-wide."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def run(code: str) -> str:
    prelude = "import gc, sys\nfrom t9k_provider.kube.importing import collector_spared\n"
    out = subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code)], capture_output=True, text=True, check=True
    )
    return out.stdout.strip()


def test_the_first_import_runs_without_the_collector_and_freezes_what_the_process_holds() -> None:
    assert (
        run("""
        assert "colorsys" not in sys.modules and gc.get_freeze_count() == 0
        with collector_spared("colorsys"):
            during = gc.isenabled()
            import colorsys
        print(during, gc.isenabled(), gc.get_freeze_count() > 0)
    """)
        == "False True True"
    )


def test_a_module_already_imported_leaves_the_collector_alone() -> None:
    assert (
        run("""
        import colorsys
        with collector_spared("colorsys"):
            during = gc.isenabled()
        print(during, gc.get_freeze_count())
    """)
        == "True 0"
    )


def test_a_collector_turned_off_by_the_process_stays_off() -> None:
    assert (
        run("""
        gc.disable()
        with collector_spared("colorsys"):
            import colorsys
        print(gc.isenabled())
    """)
        == "False"
    )


def test_a_failed_import_still_restores_the_collector() -> None:
    assert (
        run("""
        try:
            with collector_spared("no_such_module_here"):
                import no_such_module_here
        except ImportError:
            pass
        print(gc.isenabled())
    """)
        == "True"
    )

"""How fast the command line answers, against a bare Python start measured in the same run.

Each command runs in a fresh process (``python -m napari_medsam_eval ...``, as the
``medsam-eval`` script does) ``--repeats`` times; the median wall time is printed beside
the median of ``python -c pass`` (the baseline: what any Python command costs), with the
ratio and the CPU. ``tests/test_cli_startup.py`` checks *what* each command imports;
this script says what that costs.

    python benchmarks/cli_startup.py [--repeats 5]
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
from _machine import cpu_line  # noqa: E402

SAMPLE = REPO / "sample_data"
COMMANDS: list[tuple[str, list[str]]] = [
    ("python -c pass (baseline)", ["-c", "pass"]),
    ("medsam-eval --help", ["-m", "napari_medsam_eval", "--help"]),
    *[(f"medsam-eval {name} --help", ["-m", "napari_medsam_eval", name, "--help"])
      for name in ("info", "score", "segment", "run", "report", "compare", "prompt-study", "propagation-study",
                   "cache")],
    ("medsam-eval info (CT phantom)", ["-m", "napari_medsam_eval", "info", str(SAMPLE / "phantom_ct" / "image.nii.gz")]),
    ("medsam-eval score (CT phantom label vs itself)",
     ["-m", "napari_medsam_eval", "score", str(SAMPLE / "phantom_ct" / "label.nii.gz"),
      str(SAMPLE / "phantom_ct" / "label.nii.gz")]),
]


def wall_time(args: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, *args], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=True)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    print(cpu_line())
    medians = {}
    for name, command in COMMANDS:
        wall_time(command)  # a first run fills the file cache
        medians[name] = statistics.median(wall_time(command) for _ in range(args.repeats))
    baseline = medians[COMMANDS[0][0]]
    print(f"{'command':52s} {'median s':>9s} {'x python':>9s}")
    for name, seconds in medians.items():
        print(f"{name:52s} {seconds:9.3f} {seconds / baseline:9.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

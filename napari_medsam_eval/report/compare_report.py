"""Writing a paired comparison of two runs: ``compare.md``, ``compare.csv`` and a difference plot.

Never over a file medsam-eval did not write in the ``--out`` folder (:mod:`.folder`).
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from . import markup as mk
from .compare_effort import effort_blocks
from .compare_parts import part_change_blocks, part_changes
from .paired import ALL, compare_runs, paired_scores
from .document import text_table
from .figures import plot_paired_differences
from .folder import COMPARE_FILES, check_apart, check_output_folder, record_written
from .results import load_run
from .stats import METRIC_LABELS

FIGURE = "paired_difference_{metric}.png"


def comparison_rows(comparison: pd.DataFrame) -> tuple[list[str], list[list]]:
    """Header and rows of the comparison table (B - A)."""
    level = int(round(100 * comparison.attrs.get("confidence", 0.95)))
    header = ["task", "paired", "only A", "only B", "unscored", "median A", "median B", "median diff (B-A)",
              f"{level}% CI", "B better / A better", "Wilcoxon p", "note"]
    rows = []
    for _, r in comparison.iterrows():
        ci = "n/a" if pd.isna(r["ci_low"]) else f"[{r['ci_low']:.3f}, {r['ci_high']:.3f}]"
        p = "n/a" if pd.isna(r["wilcoxon_p"]) else f"{r['wilcoxon_p']:.3g}"
        rows.append([r["task"], r["n_paired"], r["n_only_a"], r["n_only_b"], r["n_unscored"], r["median_a"],
                     r["median_b"], r["median_diff"], ci, f"{r['n_b_better']} / {r['n_a_better']}", p, r["note"]])
    return header, rows


def format_comparison(comparison: pd.DataFrame) -> str:
    """The comparison table as terminal text."""
    return text_table(*comparison_rows(comparison))


def write_comparison(run_a, run_b, out_dir: str | Path, metric: str = "dice", n_boot: int = 10_000,
                     seed: int = 0, overwrite: bool = False) -> tuple[Path, pd.DataFrame]:
    """Compare run B with run A; write ``compare.md``, ``compare.csv`` and the figure in ``out_dir``
    (``overwrite``: also over files there medsam-eval did not write, :mod:`.folder`)."""
    a, b = load_run(run_a), load_run(run_b)
    out = Path(out_dir)
    check_apart([out / name for name in COMPARE_FILES[:2]], [a.source, b.source])
    check_output_folder(out, COMPARE_FILES, "comparison", overwrite)  # before any work: never over a file not ours
    comparison = compare_runs(a, b, metric=metric, n_boot=n_boot, seed=seed)
    pairs, _ = paired_scores(a, b, metric=metric)
    label = METRIC_LABELS.get(metric, metric)
    figure = plot_paired_differences(pairs, comparison, out / FIGURE.format(metric=metric), metric=metric)
    header, rows = comparison_rows(comparison)
    overall = comparison[comparison["task"] == ALL].iloc[0]
    blocks = [
        mk.heading(f"Paired comparison of {label}: B - A", 1),
        mk.bullets([f"A: {a.path} ({len(a.table)} rows)", f"B: {b.path} ({len(b.table)} rows)",
                    f"pairs matched on case_id, task, target_label; {int(overall['n_paired'])} scored in both, "
                    f"{int(overall['n_only_a'])} only in A, {int(overall['n_only_b'])} only in B, "
                    f"{int(overall['n_unscored'])} failed or unscored in either"]
                   + [f"note: {n}" for n in comparison.attrs.get("notes", [])]
                   + [f"warning: {name}: {w}" for name, run in (("A", a), ("B", b)) for w in run.warnings]),
        mk.table(header, rows, numeric=[False] + [True] * 10 + [False]),
        mk.paragraph(f"median diff: median of the paired differences B - A; CI: percentile bootstrap of that "
                     f"median ({n_boot} resamples of the pairs, seed {seed}); Wilcoxon: two-sided signed-rank "
                     f"test, zero differences dropped. '{ALL}' pools the pairs of every task.", note=True),
        mk.image(figure.name, f"paired {label} difference per task"),
        *part_change_blocks(part_changes(a, b)),
        *effort_blocks(a.table, b.table),  # two corrections runs: each one's curve and NoC
    ]
    mk.write_text(out / "compare.csv", comparison.to_csv(index=False))
    written = mk.write_text(out / "compare.md", mk.to_markdown(blocks))
    record_written(out, COMPARE_FILES)
    return written, comparison

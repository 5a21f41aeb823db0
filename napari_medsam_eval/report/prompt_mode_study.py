"""Tables and figures of the 2D prompt-mode study: the Fig. 2 table, Markdown, bar charts, files.

:func:`study_table` is Mazurowski et al.'s Fig. 2 (one row per task, mean IoU
per prompt mode), built from the runner's per-image rows;
:func:`study_markdown`, :func:`plot_mode_table` and :func:`plot_iterative`
present it; :func:`write_study` writes all of it to a folder. Figures are drawn
on a bare :class:`matplotlib.figure.Figure` with the Agg canvas: no pyplot, no
display, no global backend change.

The means are pandas' (``pivot_table(aggfunc="mean")``, NaN skipped), not
:func:`napari_medsam_eval.evaluation.aggregate.summarize`'s: that one averages the sorted
values, which moves some means by one unit in the last place, and this table
keeps the numbers the study has always written.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..core.palette import REPORT_CATEGORIES
from ..studies.prompt_mode_table import study_table  # noqa: F401 - the report names the study's table here too
from ..protocols.mazurowski import MODES
from .markup import cell_text, table, to_markdown

if TYPE_CHECKING:
    from ..studies.prompt_mode_study import StudyResults

#: what :func:`write_study` writes, by key
FILES = {
    "rows": "rows.csv",
    "iterative": "iterative.csv",
    "images": "images.csv",
    "summary": "mode_table.csv",
    "markdown": "mode_table.md",
    "figure": "mode_table.png",
    "iterative_figure": "iterative_points.png",
    "config": "study.json",
}
_COLORS = REPORT_CATEGORIES


def markdown_table(frame: pd.DataFrame, digits: int = 4) -> str:
    """A DataFrame as a GitHub Markdown table (floats with ``digits`` decimals, NaN as n/a)."""
    numeric = [pd.api.types.is_numeric_dtype(frame[c]) for c in frame.columns]
    rows = [[cell_text(v, digits) for v in row] for _, row in frame.iterrows()]
    return to_markdown([table([str(c) for c in frame.columns], rows, numeric)]).rstrip("\n")


def study_markdown(results: StudyResults, digits: int = 4) -> str:
    """The mode table (and the oracle and iterative tables) as Markdown, with the run's facts."""
    cfg, summary = results.config, results.summary
    modes = cfg.get("modes", list(MODES))
    backend = cfg.get("backend", {})
    lines = [
        "# Prompt-mode study (Mazurowski et al. 2023, modes 1-5)",
        "",
        f"Model: `{backend.get('name', '?')}`; datasets: {', '.join(cfg.get('datasets', []))}; "
        f"seed {cfg.get('seed')} ({cfg.get('seeding')}), distance transform {cfg.get('dt_backend')}, "
        f"non-oracle candidate: {cfg.get('select')}.",
        "Mean IoU per task over the images whose class mask is non-empty (n_images); "
        "modes: 1 point (largest part), 1 point per part (<= 3), 1 box (largest part), "
        "1 box per part (<= 3, merged by union), 1 box around the whole mask.",
        "",
        "## Mean IoU",
        "",
        markdown_table(summary[["task", "n_images", "n_empty"] + [f"mode {m}" for m in modes
                                                                  if f"mode {m}" in summary]], digits),
    ]
    oracle_cols = [f"mode {m} (oracle)" for m in modes if f"mode {m} (oracle)" in summary]
    if oracle_cols:
        note = (" The model gives one mask per prompt, so the oracle equals the score."
                if cfg.get("single_mask_model") else "")
        lines += ["", "## Oracle (best candidate by IoU)", "", note.strip(), "",
                  markdown_table(summary[["task"] + oracle_cols], digits)]
    point_cols = _point_columns(summary)
    if point_cols:
        lines += ["", "## Iterative points (Algorithm 1)", "", markdown_table(summary[["task"] + point_cols], digits)]
    lines += _facts(results)
    return "\n".join(lines) + "\n"


def _point_columns(summary: pd.DataFrame) -> list[str]:
    return [c for c in summary.columns if c.startswith("points ") and "oracle" not in c]


def _facts(results: StudyResults) -> list[str]:
    """The timing line and the skipped images, as Markdown lines."""
    lines: list[str] = []
    t = results.timings
    if t:
        nan = float("nan")
        lines += ["", f"{t.get('n_images', 0)} images, {t.get('n_prompts', 0)} prompts in "
                  f"{t.get('total_seconds', nan):.1f} s (encoder {t.get('encode_seconds', nan):.1f} s, "
                  f"decoder {t.get('decode_seconds', nan):.1f} s)."]
    if results.skipped:
        lines += ["", f"Skipped {len(results.skipped)} image(s): " +
                  "; ".join(f"{s['image']} ({s['reason']})" for s in results.skipped[:10])]
    return lines


def _figure(width: float, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height))
    FigureCanvasAgg(fig)
    return fig


def _save(fig, path: str | Path) -> Path:
    path = Path(path)
    fig.savefig(path, dpi=150, bbox_inches="tight")
    return path


def plot_mode_table(results: StudyResults, path: str | Path, title: str | None = None) -> Path:
    """Grouped bars, one group per task and one bar per mode (mean IoU), oracle as an outline behind."""
    summary = results.summary
    modes = [m for m in results.config.get("modes", list(MODES)) if f"mode {m}" in summary]
    tasks = list(summary["task"])
    n, k = max(len(tasks), 1), max(len(modes), 1)
    fig = _figure(max(6.0, 1.3 * n + 2.5), 4.5)
    ax = fig.add_subplot()
    width = 0.8 / k
    x0 = np.arange(len(tasks))
    for j, mode in enumerate(modes):
        x = x0 + (j - (k - 1) / 2) * width
        color = _COLORS[j % len(_COLORS)]
        oracle_col = f"mode {mode} (oracle)"
        if oracle_col in summary and not results.config.get("single_mask_model"):
            ax.bar(x, np.nan_to_num(summary[oracle_col].to_numpy(float)), width, fill=False, edgecolor=color,
                   linewidth=0.8, linestyle="--", label="oracle" if j == 0 else None)
        values = summary[f"mode {mode}"].to_numpy(float)
        bars = ax.bar(x, np.nan_to_num(values), width * 0.85, color=color, label=f"mode {mode}")
        if n * k <= 60:  # value labels while they stay legible
            ax.bar_label(bars, labels=["" if np.isnan(v) else f"{v:.2f}" for v in values], fontsize=6, padding=1)
    ax.set_xticks(x0)
    ax.set_xticklabels(tasks, rotation=30 if n > 3 else 0, ha="right" if n > 3 else "center")
    ax.set_ylim(0, 1.08)
    ax.set_yticks(np.linspace(0, 1, 6))
    ax.set_ylabel("mean IoU")
    ax.grid(axis="y", alpha=0.3)
    name = results.config.get("backend", {}).get("name", "")
    ax.set_title(title or f"{name}: IoU per prompt mode (Mazurowski et al. 2023, Fig. 2 layout)")
    ax.legend(ncol=min(k + 1, 6), fontsize="small", loc="upper left", bbox_to_anchor=(0, -0.18 if n > 3 else -0.08))
    return _save(fig, path)


def plot_iterative(results: StudyResults, path: str | Path) -> Path:
    """Mean IoU against the number of iterative points, one line per task."""
    summary = results.summary
    cols = _point_columns(summary)
    ks = [int(c.split()[1]) for c in cols]
    fig = _figure(6, 4)
    ax = fig.add_subplot()
    for _, row in summary.iterrows():
        ax.plot(ks, row[cols].to_numpy(float), marker="o", label=row["task"])
    ax.set_xlabel("number of points")
    ax.set_ylabel("mean IoU")
    ax.set_ylim(0, 1)
    ax.set_xticks(ks)
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    return _save(fig, path)


def write_study(results: StudyResults, out_dir: str | Path, *, figure: bool = True) -> dict[str, Path]:
    """Write the study to ``out_dir`` (made if needed); returns ``{what: path}``.

    ``rows.csv`` (image x class x mode), ``mode_table.csv`` and
    ``mode_table.md`` (tasks x modes, plus oracle and iterative columns),
    ``images.csv`` (per-image timings), ``study.json`` (settings, backend,
    timings, skipped images), ``mode_table.png`` (grouped bars), and with
    iterative points ``iterative.csv`` and ``iterative_points.png``.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {key: out / name for key, name in FILES.items()}
    has_iterative = not results.iterative.empty
    wanted = [k for k in FILES if (has_iterative or "iterative" not in k) and (figure or "figure" not in k)]
    results.rows.to_csv(paths["rows"], index=False)
    results.images.to_csv(paths["images"], index=False)
    results.summary.to_csv(paths["summary"], index=False)
    paths["markdown"].write_text(study_markdown(results))
    record = {"config": results.config, "timings": results.timings, "skipped": results.skipped}
    paths["config"].write_text(json.dumps(record, indent=2, default=str))
    if has_iterative:
        results.iterative.to_csv(paths["iterative"], index=False)
    if figure:
        plot_mode_table(results, paths["figure"])
        if has_iterative:
            plot_iterative(results, paths["iterative_figure"])
    return {key: paths[key] for key in wanted}

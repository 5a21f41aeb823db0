"""The run report: ``report.md`` and ``report.html`` in the run directory, figures in ``figures/``.

Written whole or not at all (:mod:`.swap`): drawn into a stage folder, then swapped in.

Results first: what was read (rows, failures), the overall median (median of task medians and
pooled median, both labelled), the per-task table (DSC and NSD as median [q25, q75], mean, n,
failures), why it failed (the error parts per task, :mod:`.error_section`), the same task table split
by each case attribute with a few values (e.g. SUN-SEG difficulty), for a ``corrections`` run the
effort section (NoC per task and the DSC-vs-interactions curves, :mod:`.effort_section`), the box
plots, failed cases with their errors and the worst cases with their per-slice DSC along z or t; the
run's details (from ``manifest.json``, else from the table) and its timing at the end.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from ..evaluation.aggregate import format_median_iqr
from ..benchmark.manifest import MANIFEST_FILE
from ..benchmark.parts_backfill import fill_parts
from ..benchmark.schema import is_missing, labels_text
from ..core.ownership import overlap
from ..core.palette import REPORT_MARK, REPORT_PROMPT, REPORT_STOP, color_name
from . import markup as mk
from .effort_section import EFFORT_FIGURE, effort_blocks
from .error_section import error_blocks
from .explain_section import EXPLAIN_FIGURE, explain_blocks, read_explain
from .folder import REPORT_FILES, check_apart, check_output_folder, record_written
from .lesion_section import lesion_blocks
from .sensitivity_section import sensitivity_blocks
from .swap import FIGURES, Stage, clean_leftovers
from .figures import plot_slice_dice, plot_task_boxes
from .results import RunResults, attribute_column, load_run, parse_json_cell
from ..propagation.stop_words import STOP_LABELS, stop_sentence
from .stats import (DEFAULT_METRICS, METRIC_LABELS, failed_cases, overall_summary, slice_dice_summary,
                    stop_reason_counts, stops_text, summarize_tasks, worst_cases)

MANIFEST_SECTIONS = ("model", "checkpoint", "protocol", "dataset", "seed", "date", "started", "finished", "times",
                     "versions", "arguments")
MAX_FACTS, MAX_FAILED, MAX_VALUE = 60, 200, 160


def _stop_legend(reason: str) -> str:
    """``shape changed: the mask changed too much from the slice before`` (a column of the stops table)."""
    why = "the end of the volume or video" if reason == "end" else stop_sentence(reason)
    return f"{STOP_LABELS.get(reason, reason)}: {why}"


def median_iqr(row: pd.Series | dict, metric: str) -> str:
    """``'0.912 [0.850, 0.941]'`` for ``metric`` of a :func:`summarize_tasks` row."""
    return format_median_iqr({k: row[f"{metric}_{k}"] for k in ("n", "median", "q25", "q75")})


def _flatten(value: Any, prefix: str, out: list[tuple[str, str]], depth: int = 0) -> None:
    if isinstance(value, dict) and depth < 3:
        for key, item in value.items():
            _flatten(item, f"{prefix}.{key}" if prefix else str(key), out, depth + 1)
        return
    if isinstance(value, (list, tuple)) and len(value) > 10:
        text = f"[{len(value)} items]"
    elif isinstance(value, (list, tuple)):
        text = ", ".join(map(str, value))
    else:
        text = str(value)
    out.append((prefix, text if len(text) <= MAX_VALUE else text[: MAX_VALUE - 3] + "..."))


def manifest_facts(manifest: dict, table: pd.DataFrame) -> list[str]:
    """``key: value`` lines about the run, known sections first; the table fills in what the manifest lacks."""
    ordered = [k for k in MANIFEST_SECTIONS if k in manifest] + [k for k in manifest if k not in MANIFEST_SECTIONS]
    flat: list[tuple[str, str]] = []
    for key in ordered:
        _flatten(manifest[key], key, flat)
    facts = [f"{key}: {value}" for key, value in flat[:MAX_FACTS]]
    if len(flat) > MAX_FACTS:
        facts.append(f"... and {len(flat) - MAX_FACTS} more entries in {MANIFEST_FILE}")
    for column in ("model", "protocol", "dataset"):
        if not any(key == column or key.startswith(column + ".") for key, _ in flat):
            values = sorted({str(v) for v in table[column] if not is_missing(v) and v != ""})
            if values:
                facts.append(f"{column} (from the results table): {', '.join(values)}")
    return facts


def auto_attributes(table: pd.DataFrame, max_values: int = 8) -> list[str]:
    """Attribute keys worth a split: 2..``max_values`` distinct values, not one per row."""
    seen: dict[str, set] = {}
    for cell in table["attributes"]:
        attributes = parse_json_cell(cell, default={})
        if isinstance(attributes, dict):
            for key, value in attributes.items():
                if isinstance(value, (str, int, bool)) or value is None:
                    seen.setdefault(str(key), set()).add(str(value))
    return sorted(k for k, v in seen.items() if 2 <= len(v) <= min(max_values, max(len(table) - 1, 2)))


def task_rows(summary: pd.DataFrame, keys: Sequence[str], metrics: Sequence[str]) -> tuple[list[str], list[list]]:
    """Header and rows of a per-group table: keys, n, failed, empty GT, then median [IQR] and mean per metric."""
    header = [*keys, "n", "failed", "empty GT"]
    for metric in metrics:
        label = METRIC_LABELS.get(metric, metric)
        header += [f"{label} median [IQR]", f"{label} mean"]
    rows = []
    for _, row in summary.iterrows():
        cells = [row[k] for k in keys] + [int(row["n"]), int(row["n_failed"]), int(row.get("n_empty_gt", 0))]
        for metric in metrics:
            cells += [median_iqr(row, metric), row[f"{metric}_mean"]]
        rows.append(cells)
    return header, rows


def overall_rows(overall: pd.DataFrame) -> tuple[list[str], list[list]]:
    header = ["metric", "tasks", "median of task medians [q25, q75 of task medians]", "scored cases",
              "pooled median [IQR]", "pooled mean"]
    rows = []
    for metric, row in overall.iterrows():
        across = {"n": row["n_tasks"], "median": row["median_of_task_medians"], "q25": row["task_medians_q25"],
                  "q75": row["task_medians_q75"]}
        pooled = {"n": row["pooled_n"], "median": row["pooled_median"], "q25": row["pooled_q25"],
                  "q75": row["pooled_q75"]}
        rows.append([METRIC_LABELS.get(metric, metric), int(row["n_tasks"]), format_median_iqr(across),
                     int(row["pooled_n"]), format_median_iqr(pooled), row["pooled_mean"]])
    return header, rows


def text_table(header: Sequence[str], rows: Sequence[Sequence]) -> str:
    """A fixed-width table for the terminal."""
    cells = [[mk.cell_text(v) for v in row] for row in rows]
    widths = [max([len(str(h))] + [len(r[i]) for r in cells]) for i, h in enumerate(header)]
    line = lambda r: "  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w)  # noqa: E731
                               for i, (c, w) in enumerate(zip(r, widths)))
    return "\n".join([line(header), "  ".join("-" * w for w in widths)] + [line(r) for r in cells])


def _safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", str(text)).strip("_")[:60] or "case"


def _timing(table: pd.DataFrame) -> str | None:
    ok = table[table["status"].eq("ok")]
    total = ok["time_total_s"].dropna()
    if total.empty:
        return None
    enc, dec = ok["time_encoder_s"].median(), ok["time_decoder_s"].median()
    return (f"time per target: median {total.median():.2f} s (encoder {mk.cell_text(enc, 2)} s, decoder "
            f"{mk.cell_text(dec, 2)} s), {total.sum():.1f} s in all")


def build_report(run: RunResults, out_dir: Path, worst_k: int = 5, attributes: Sequence[str] | None = None,
                 metrics: Sequence[str] = DEFAULT_METRICS) -> list[tuple]:
    """The report's blocks; draws the figures under ``out_dir / figures`` (a :class:`.swap.Stage`'s)."""
    table = run.table
    figures = out_dir / FIGURES
    summary = summarize_tasks(table, metrics=metrics)
    overall = overall_summary(table, metrics=metrics)
    blocks = [mk.heading(f"Benchmark report: {run.name}", 1)]
    source = run.source.name if run.source else "table"
    empty = int(table["status"].eq("empty_gt").sum())
    results = [f"results: {source}, {len(table)} rows (case x target), {int(table['status'].eq('failed').sum())} "
               "failed" + (f", {empty} with no ground truth of their target (empty_gt: not scored, not in n)"
                           if empty else "")]
    tolerances = sorted(table["nsd_tolerance_mm"].dropna().unique())
    if tolerances and "nsd" in metrics:
        results.append("NSD tolerance: " + ", ".join(f"{t:g} mm" for t in tolerances))
    results += [f"note: {n}" for n in run.notes] + [f"warning: {w}" for w in run.warnings]
    blocks += [mk.bullets(results), mk.heading("Overall")]
    blocks += [mk.table(*overall_rows(overall), numeric=[False, True, True, True, True, True])]
    blocks.append(mk.paragraph(
        "Median of task medians: each task's median, then the median across tasks (every task weighs the same, "
        "as MedSAM2 reports). Pooled: one median over all scored cases (large tasks weigh more). Failed cases "
        "are counted in 'failed' and left out of every statistic; cases with no score (NaN) are left out too.",
        note=True))
    header, rows = task_rows(summary, ["task"], metrics)
    blocks += [mk.heading("Per task"), mk.table(header, rows, numeric=[False] + [True] * (len(header) - 1))]
    blocks += error_blocks(table, figures, FIGURES, unit="frames" if set(table["kind"]) == {"video"} else "slices")
    blocks += explain_blocks(table, read_explain(run.path), figures, FIGURES)
    for attribute in (auto_attributes(table) if attributes is None else list(attributes)):
        split = summarize_tasks(table, by=("task", attribute), metrics=metrics)
        has_it = attribute_column(table, attribute).ne("n/a")
        split = split[split["task"].isin(set(table.loc[has_it, "task"].astype(str)))]  # tasks with the attribute
        header, rows = task_rows(split, ["task", attribute], metrics)
        blocks += [mk.heading(f"Per task and {attribute}", 3),
                   mk.table(header, rows, numeric=[False, False] + [True] * (len(header) - 2))]
    blocks += effort_blocks(table, figures, FIGURES)  # corrections runs only
    blocks += sensitivity_blocks(table)  # runs with the sensitivity option only
    blocks += lesion_blocks(table, run.manifest)  # runs with a target taken lesion by lesion only
    blocks.append(mk.heading("Figures"))
    for metric in metrics:
        if table[metric].notna().any():
            path = plot_task_boxes(table, figures / f"box_{metric}.png", metric=metric)
            label = METRIC_LABELS.get(metric, metric)
            blocks += [mk.paragraph(f"{label} per task (box: median and quartiles; points: cases)"),
                       mk.image(f"{FIGURES}/{path.name}", f"{label} per task")]
    reasons = stop_reason_counts(table)
    if len(reasons.columns) > 1:
        blocks += [mk.heading("Why propagation stopped"),
                   mk.paragraph("Directions of propagation per task, by the rule that ended them: "
                                + "; ".join(_stop_legend(c) for c in reasons.columns[1:]) + ".", True),
                   mk.table(["task", *(STOP_LABELS.get(c, c) for c in reasons.columns[1:])], reasons.values.tolist(),
                            numeric=[False] + [True] * (len(reasons.columns) - 1))]
    failed = failed_cases(table)
    blocks.append(mk.heading(f"Failed cases ({len(failed)})"))
    if failed.empty:
        blocks.append(mk.paragraph("None."))
    else:
        blocks.append(mk.table(["case", "task", "label", "error"],
                               [[r["case_id"], r["task"], labels_text(r), r["error"]]
                                for _, r in failed.head(MAX_FAILED).iterrows()]))
        if len(failed) > MAX_FAILED:
            blocks.append(mk.paragraph(f"... and {len(failed) - MAX_FAILED} more (see the results table).", True))
    worst = worst_cases(table, worst_k)
    blocks.append(mk.heading(f"Worst {len(worst)} cases by DSC"))
    worst_rows, images = [], []
    for rank, (_, row) in enumerate(worst.iterrows(), start=1):
        per_slice = slice_dice_summary(row)
        lowest = "n/a" if per_slice["argmin"] is None else f"{per_slice['min']:.3f} at {per_slice['argmin']}"
        worst_rows.append([rank, row["case_id"], row["task"], labels_text(row), row["dice"], row["nsd"], lowest,
                           stops_text(row)])
        name = f"slices_{rank:02d}_{_safe_name(row['case_id'])}.png"
        plot_slice_dice(row, figures / name)
        images.append(mk.image(f"{FIGURES}/{name}", f"per-slice DSC of {row['case_id']}"))
    if worst_rows:
        blocks.append(mk.table(["rank", "case", "task", "label", "DSC", "NSD", "lowest slice DSC at slice",
                                "propagation stopped"],
                               worst_rows, numeric=[True, False, False, False, True, True, True, False]))
        blocks.append(mk.paragraph("Per-slice (volumes, along z) or per-frame (videos, along t) DSC; the dashed "
                                   f"{color_name(REPORT_PROMPT)} line marks the prompted slice, the "
                                   f"{color_name(REPORT_MARK)} dot the lowest DSC, dotted "
                                   f"{color_name(REPORT_STOP)} lines where propagation stopped and why.",
                                   note=True))
        blocks += images
    else:
        blocks.append(mk.paragraph("No scored cases."))
    facts = manifest_facts(run.manifest, table) + [t for t in [_timing(table)] if t]
    return blocks + [mk.heading("Run"), mk.bullets(facts)]


def write_report(run_dir: str | Path, worst_k: int = 5, attributes: Sequence[str] | None = None,
                 out_dir: str | Path | None = None, lenient: bool = False, overwrite: bool = False) -> Path:
    """Write ``report.md``, ``report.html``, ``task_summary.csv`` and ``figures/``; return the Markdown path.

    ``attributes`` names the case attributes to split the task table by
    (``None``: every attribute with 2-8 values). The files go to ``out_dir``,
    the run directory by default; another folder must not hold report files
    medsam-eval did not write there (:mod:`.folder`), checked before any work.
    The report replaces the one there whole or not at all (:mod:`.swap`), and
    removes what reports killed part-way left. ``lenient``: skip the bad rows
    of a results file rather than refuse it (:func:`.results.load_run`);
    ``overwrite``: also over files in ``out_dir`` medsam-eval did not write.
    """
    run = load_run(run_dir, lenient)
    out = Path(out_dir) if out_dir is not None else run.path
    own = run.source is not None and (out_dir is None or overlap(out, run.path) == "is")
    check_apart([out / name for name in REPORT_FILES[:3]], [run.source, run.path / MANIFEST_FILE])
    if not own:
        check_output_folder(out, REPORT_FILES, "report", overwrite)
    table, filled = fill_parts(run.path, run.table)  # a run folder from before the error parts
    if filled:
        run.table = table
        run.notes.append(f"the error parts of {filled} rows were computed from their saved predictions (the run "
                         "folder predates them; a target overwritten where targets overlapped gets the parts of "
                         "what was saved)")
    title = f"Benchmark report: {run.name}"
    with Stage(out) as stage:
        blocks = build_report(run, stage.path, worst_k=worst_k, attributes=attributes)
        (stage.path / "task_summary.csv").write_text(summarize_tasks(run.table).to_csv(index=False), encoding="utf-8")
        stale = ["slices_*.png", EFFORT_FIGURE, EXPLAIN_FIGURE, *(f"box_{metric}.png" for metric in DEFAULT_METRICS)]
        stage.commit(blocks, {"report.html": lambda b: mk.to_html(b, title), "report.md": mk.to_markdown},
                     files=["task_summary.csv"], stale=stale)
    clean_leftovers(out)
    if not own:
        record_written(out, REPORT_FILES)
    return out / "report.md"


def format_task_summary(table: pd.DataFrame, metrics: Sequence[str] = DEFAULT_METRICS) -> str:
    """The per-task table and the overall medians as terminal text."""
    summary = summarize_tasks(table, metrics=metrics)
    text = text_table(*task_rows(summary, ["task"], metrics))
    return text + "\n\n" + text_table(*overall_rows(overall_summary(table, metrics=metrics)))

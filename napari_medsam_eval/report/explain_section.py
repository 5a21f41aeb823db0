"""The report's "What would fix it" section, from ``explain.csv`` (:mod:`..benchmark.explain`).

Per task: the median DSC as run and under each counterfactual variant, each with its difference from the
median as run beside it (so a row adds up: 0.096 as run, 0.267 with the true extent, +0.171), and the
stage that costs most in a clinician's words: the one whose median of each result's own cost is largest
(a result's gain under the variant; the true box on every slice has the true extent too, so its stage
costs what it gains beyond the true extent, :data:`~..studies.counterfactuals.INCLUDES`), told with that
median, the "why it failed" parts and the stop rules that ended the run's propagation. The prompt slice's own DSC per task (from the run's rows: how good the model is even
where it was told). A figure draws each task's staircase from the run to the model's ceiling with box
prompts. Without ``explain.csv`` the section gives the prompt slice's DSC and the command to run.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..benchmark.explain import EXPLAIN_FILE, variant_column
from ..evaluation.error_parts import PARTS, part_name
from ..propagation.stop_words import STOP_LABELS
from ..studies.counterfactuals import INCLUDES, STAGE_WORDS, VARIANT_WORDS, VARIANTS
from . import markup as mk
from .stats import natural_key, ok_rows, stop_reason_counts

#: the figure of each task's staircase (under the report's ``figures/``)
EXPLAIN_FIGURE = "what_would_fix_it.png"
#: a median gain below this is "no stage costs much"
SMALL_GAIN = 0.01


def read_explain(run_dir: str | Path) -> pd.DataFrame | None:
    """``explain.csv`` of a run folder; None when there is none (or it cannot be read)."""
    path = Path(run_dir) / EXPLAIN_FILE
    if not path.is_file():
        return None
    try:
        return pd.read_csv(path, dtype={"case_id": str, "label_name": str})
    except (OSError, ValueError, pd.errors.ParserError):
        return None


def run_seconds(run_dir: str | Path, explained: pd.DataFrame) -> float:
    """The run's own segmentation time (``time_total_s``) on the results in ``explained``; 0 when unknown."""
    from ..benchmark.store import load_table

    try:
        table = load_table(run_dir)
    except Exception:  # noqa: BLE001 - the cost line is left out, nothing else depends on it
        return 0.0
    if "time_total_s" not in table.columns or explained.empty:
        return 0.0
    keys = set(zip(explained["case_id"].astype(str), explained["label_name"].astype(str)))
    chosen = [(str(c), str(n)) in keys for c, n in zip(table["case_id"], table["label_name"])]
    return float(table.loc[chosen, "time_total_s"].sum())


def stage_costs(rows: pd.DataFrame, variant: str) -> pd.Series:
    """Each result's cost of ``variant``'s stage: its gain, or for a variant that has another's fix too
    (:data:`INCLUDES`) its DSC less that variant's where both apply (its gain where the other does not)."""
    dice = pd.to_numeric(rows[variant_column("dice", variant)], errors="coerce")
    gain = pd.to_numeric(rows[variant_column("gain", variant)], errors="coerce")
    inner = INCLUDES.get(variant)
    if inner is None:
        return gain
    beyond = dice - pd.to_numeric(rows[variant_column("dice", inner)], errors="coerce")
    return beyond.where(beyond.notna(), gain)


def task_gains(explained: pd.DataFrame) -> pd.DataFrame:
    """Per task: n, the median DSC as run, each variant's median DSC (where it applies: ``n_<variant>``), its
    difference from the median as run (``lift_<variant>``: the row adds up), the median of each result's own
    gain (``gain_<variant>``) and of its stage's cost (``cost_<variant>``, :func:`stage_costs`), and the
    variant whose stage cost is largest (``costliest``; "" when none costs :data:`SMALL_GAIN`)."""
    usable = explained[explained["status"].isin(["ok", "differs"])]
    out = []
    for task in sorted(set(usable["task"].astype(str)), key=natural_key):
        rows = usable[usable["task"].astype(str) == task]
        entry: dict[str, object] = {"task": task, "n": len(rows), "dice_run": float(rows["dice_run"].median()),
                                    "prompt_slice_dice": float(rows["prompt_slice_dice"].median())}
        for variant in VARIANTS:
            dice = pd.to_numeric(rows[variant_column("dice", variant)], errors="coerce")
            gain = pd.to_numeric(rows[variant_column("gain", variant)], errors="coerce")
            cost = stage_costs(rows, variant)
            entry[f"n_{variant}"] = int(dice.notna().sum())
            entry[f"dice_{variant}"] = float(dice.median()) if dice.notna().any() else float("nan")
            entry[f"lift_{variant}"] = entry[f"dice_{variant}"] - entry["dice_run"]
            entry[f"gain_{variant}"] = float(gain.median()) if gain.notna().any() else float("nan")
            entry[f"cost_{variant}"] = float(cost.median()) if cost.notna().any() else float("nan")
        costs = {v: entry[f"cost_{v}"] for v in VARIANTS if np.isfinite(entry[f"cost_{v}"])}
        best = max(costs, key=costs.get) if costs else ""
        entry["costliest"] = best if best and costs[best] >= SMALL_GAIN else ""
        out.append(entry)
    return pd.DataFrame(out)


def _costliest_cell(gains: pd.Series) -> str:
    best = gains["costliest"]
    return f"{STAGE_WORDS[best]} ({_signed(gains[f'cost_{best}'])})" if best else "none"


def costliest_words(gains: pd.Series) -> str:
    """``carrying the box from slice to slice costs most (median +0.13 a result)``, or that none costs much."""
    best = gains["costliest"]
    if not best:
        return f"no stage costs {SMALL_GAIN:g} of DSC (median of each result's own gain)"
    return f"{STAGE_WORDS[best]} costs most (median {_signed(gains[f'cost_{best}'])} a result)"


def _signed(value: float) -> str:
    return f"{value:+.2f}" if np.isfinite(value) else "n/a"


def in_frames(text: str, explained: pd.DataFrame, task: str) -> str:
    """``text`` with slice(s) said as frame(s) when the task's results are videos."""
    kinds = set(explained.loc[explained["task"].astype(str) == task, "kind"].astype(str))
    return text.replace("slice", "frame") if kinds == {"video"} else text


def explain_summary_lines(explained: pd.DataFrame) -> list[str]:
    """One line per task for a terminal: the DSC as run, under each variant (gain), the costliest stage."""
    lines = []
    for _, r in task_gains(explained).iterrows():
        told = [f"{VARIANT_WORDS[v]} {r[f'dice_{v}']:.3f} ({_signed(r[f'lift_{v}'])})" for v in VARIANTS
                if r[f"n_{v}"]]
        line = f"{r['task']} (n={r['n']}): median DSC as run {r['dice_run']:.3f}; " + ", ".join(told) \
            + f": {costliest_words(r)}"
        lines.append(in_frames(line, explained, str(r["task"])))
    failed = explained[~explained["status"].isin(["ok", "differs"])]
    if len(failed):
        lines.append(f"{len(failed)} result(s) not explained: " + "; ".join(
            f"{r.case_id}/{r.label_name}: {r.note}" for r in failed.head(3).itertuples()))
    differs = int((explained["status"] == "differs").sum())
    if differs:
        lines.append(f"{differs} result(s) not reproduced exactly (status 'differs'): see their note")
    return lines


def _why_words(table: pd.DataFrame, task: str) -> list[str]:
    """The task's largest error part (its mean share) and the stop rule that ended most directions."""
    scored = table[ok_rows(table) & (table["task"].astype(str) == task)]
    words = []
    shares = {p: float(scored[f"error_{p}"].mean()) for p in PARTS if f"error_{p}" in scored.columns}
    shares = {p: s for p, s in shares.items() if np.isfinite(s)}
    if shares:
        part = max(shares, key=shares.get)
        words.append(f"{part_name(part)} {shares[part]:.2f} of the error")
    reasons = stop_reason_counts(table)
    if len(reasons.columns) > 1 and task in set(reasons["task"].astype(str)):
        counts = reasons[reasons["task"].astype(str) == task].iloc[0].drop("task").astype(int)
        if counts.sum():
            reason = str(counts.idxmax())
            words.append(f"{counts.max()} of {counts.sum()} directions ended by '{STOP_LABELS.get(reason, reason)}'")
    return words


def task_sentence(table: pd.DataFrame, gains: pd.Series) -> str:
    """``missed slices 0.33 of the error; 35 of 40 directions ended by 'brightness changed'; with the true
    extent the median DSC would be 0.47 instead of 0.32: stopping too early or too late costs most (median
    +0.15 a result)``."""
    words = _why_words(table, str(gains["task"]))
    best = gains["costliest"]
    if best:
        words.append(f"with {VARIANT_WORDS[best]} the median DSC would be {gains[f'dice_{best}']:.2f} instead of "
                     f"{gains['dice_run']:.2f}: {costliest_words(gains)}")
    else:
        words.append(costliest_words(gains))
    return "; ".join(words)


def explain_blocks(table: pd.DataFrame, explained: pd.DataFrame | None, figures: Path,
                   figures_name: str) -> list[tuple]:
    """The section's blocks; draws the staircase under ``figures`` when there is ``explain.csv``."""
    blocks = [mk.heading("What would fix it")]
    scored = table[ok_rows(table)]
    slice_dice = scored.groupby(scored["task"].astype(str))["prompt_slice_dice"].median() \
        if "prompt_slice_dice" in scored.columns else pd.Series(dtype=float)
    if explained is None or explained.empty:
        if slice_dice.notna().any():
            blocks += [mk.paragraph("The prompt slice's own DSC (median per task): how good the model is where it "
                                    "was told."),
                       mk.table(["task", "prompt slice DSC"], [[t, v] for t, v in slice_dice.items()],
                                numeric=[False, True])]
        return blocks + [mk.paragraph("To measure what each stage costs, run medsam-eval explain on this run "
                                      "folder: each result is run again with the true extent, the best prompt "
                                      "slice and the true box on every slice (it says first what that will cost).",
                                      note=True)]
    gains = task_gains(explained)
    blocks.append(mk.paragraph(
        "Each result was run again by the same model, prompts and rules with one stage made perfect: the true "
        "extent (propagation kept to the object's first and last slice, no stop rule), the best prompt slice "
        "(the protocol's prompt on the slice where the object is largest) and the true box on every slice (no "
        "propagation: the model's ceiling with box prompts). Each DSC is the median over the results where the "
        "variant applies; in brackets, its difference from the median as run, so a row adds up. What costs most "
        "is ranked by the median of each result's own gain, which can differ from the difference of the "
        "medians; the true box on every slice has the true extent too, so its stage, carrying the box from "
        "slice to slice, is counted by what it gains beyond the true extent.", note=True))
    header = ["task", "n", "median DSC as run", "prompt slice DSC",
              *(f"{VARIANT_WORDS[v]}: median DSC (difference)" for v in VARIANTS),
              "costs most (median of each result's own cost)"]
    rows = [[r["task"], r["n"], r["dice_run"], r["prompt_slice_dice"],
             *(f"{r[f'dice_{v}']:.3f} ({_signed(r[f'lift_{v}'])})" if r[f"n_{v}"] else "n/a" for v in VARIANTS),
             in_frames(_costliest_cell(r), explained, str(r["task"]))] for _, r in gains.iterrows()]
    blocks.append(mk.table(header, rows, numeric=[False, True, True, True] + [False] * (len(VARIANTS) + 1)))
    blocks.append(mk.bullets([in_frames(f"{r['task']}: {task_sentence(table, r)}", explained, str(r["task"]))
                              for _, r in gains.iterrows()]))
    lines = explain_summary_lines(explained)[len(gains):]
    if lines:
        blocks.append(mk.bullets(lines))
    if len(gains):
        path = plot_staircase(gains, figures / EXPLAIN_FIGURE)
        blocks.append(mk.image(f"{figures_name}/{path.name}", "each task's median DSC as run and with each stage "
                                                              "made perfect"))
    return blocks


def plot_staircase(gains: pd.DataFrame, path: str | Path) -> Path:
    """Per task, a row of points: the median DSC as run, then each variant's, ascending to the ceiling."""
    from .figures import _new_figure, save_figure
    from ..core.palette import REPORT_GUIDE, REPORT_STAIRCASE

    colours = dict(zip(("run", *VARIANTS), REPORT_STAIRCASE))
    markers = {"run": "o", "oracle_extent": "s", "oracle_prompt_slice": "^", "oracle_box": "D"}
    figure = _new_figure(7.0, max(2.4, 0.5 * len(gains) + 1.6))
    axes = figure.add_subplot()
    positions = np.arange(len(gains))[::-1]
    for y, (_, r) in zip(positions, gains.iterrows()):
        values = [r["dice_run"], *(r[f"dice_{v}"] for v in VARIANTS)]
        finite = [v for v in values if np.isfinite(v)]
        axes.plot([min(finite), max(finite)], [y, y], color=REPORT_GUIDE, linewidth=1.5, zorder=1)
    for key in ("run", *VARIANTS):
        column = "dice_run" if key == "run" else f"dice_{key}"
        axes.scatter(gains[column], positions, color=colours[key], marker=markers[key], s=36, zorder=2,
                     label="as run" if key == "run" else VARIANT_WORDS[key])
    axes.set_yticks(positions)
    axes.set_yticklabels([f"{t} (n={n})" for t, n in zip(gains["task"], gains["n"])], fontsize=8)
    axes.set_ylim(-0.7, len(gains) - 0.3)
    axes.set_xlim(0, 1)
    axes.set_xlabel("median DSC")
    axes.grid(axis="x", alpha=0.3)
    axes.set_title("What would fix it: the run, and each stage made perfect")
    figure.legend(loc="outside lower center", fontsize=7, ncols=4)
    return save_figure(figure, path)


__all__ = ["EXPLAIN_FIGURE", "explain_blocks", "explain_summary_lines", "read_explain", "run_seconds",
           "task_gains", "task_sentence"]

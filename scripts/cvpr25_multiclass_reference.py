"""Regenerate ``tests/data/cvpr25_reference/multiclass_outputs.json``: the CVPR 2025 challenge's own functions
on multi-class cases whose classes' masks overlap (PROVENANCE.md there).

The challenge's code is not in this repository. Fetch github.com/JunMa11/CVPR-MedSegFMCompetition at 748e862
into a scratch folder outside it, with ``connected-components-3d`` beside it, and point ``--challenge`` there::

    mkdir -p /tmp/cvpr25 && cd /tmp/cvpr25 && git -C REPO show 748e862:CVPR25_iter_eval.py > CVPR25_iter_eval.py
    (the same for get_boxes.py and SurfaceDice.py)
    pip install --no-deps --target /tmp/cvpr25/site connected-components-3d==4.1.1
    python scripts/cvpr25_multiclass_reference.py --challenge /tmp/cvpr25 --shared ../shared/data

Only the scripts' function definitions run (taken by their syntax tree: no argparse, docker or pool), and
the click block of ``CVPR25_iter_eval.py``'s loop, verbatim, for every class of a step (the loop over
``enumerate(sorted(unique_gts[1:]))`` with the ``unique_gts`` line before it). A model-free stand-in
(``tests/cvpr25_standin.py``) gives each class's mask; the classes are put in one ``segs`` map in label
order, a later class over an earlier one, as the challenge's baseline inference writes it.
"""
from __future__ import annotations

import argparse
import ast
import json
import sys
import types
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import cvpr25_standin as standin  # noqa: E402


def _namespace(challenge: Path) -> dict:
    """The challenge files' functions (and the iter script's click block as ``click_block``) in one
    namespace, with their imports; the GPU branch of ``compute_edt`` is off (``torch.cuda`` says none)."""
    import pandas as pd
    from scipy import integrate
    from scipy.ndimage import distance_transform_edt

    sys.path.insert(0, str(challenge / "site"))
    import cc3d

    space: dict = {"np": np, "pd": pd, "cc3d": cc3d, "integrate": integrate,
                   "distance_transform_edt": distance_transform_edt,
                   "torch": types.SimpleNamespace(cuda=types.SimpleNamespace(is_available=lambda: False))}
    surface = ast.parse((challenge / "SurfaceDice.py").read_text())
    exec(compile(surface, "SurfaceDice.py", "exec"), space)  # a module of functions and tables only
    for name in ("get_boxes.py", "CVPR25_iter_eval.py"):
        tree = ast.parse((challenge / name).read_text())
        functions = [node for node in tree.body if isinstance(node, ast.FunctionDef)]
        exec(compile(ast.Module(body=functions, type_ignores=[]), name, "exec"), space)
        if name == "CVPR25_iter_eval.py":
            unique = next(n for n in ast.walk(tree) if isinstance(n, ast.Assign)
                          and getattr(n.targets[0], "id", "") == "unique_gts")
            loop = next(n for n in ast.walk(tree) if isinstance(n, ast.For) and isinstance(n.target, ast.Tuple)
                        and [e.id for e in n.target.elts] == ["ind", "cls"])
            args = ast.arguments(posonlyargs=[], args=[ast.arg(a) for a in ("segs", "gts", "clicks_cls",
                                                                             "clicks_order", "verbose")],
                                 kwonlyargs=[], kw_defaults=[], defaults=[])
            block = ast.FunctionDef(name="click_block", args=args, body=[unique, loop], decorator_list=[],
                                    returns=None, type_params=[])
            module = ast.fix_missing_locations(ast.Module(body=[block], type_ignores=[]))
            exec(compile(module, name, "exec"), space)
    return space


def run_case(space: dict, name: str, shared: Path) -> dict:
    gts, spacing = standin.load(name, shared)
    classes = [int(v) for v in np.sort(np.unique(gts))[1:]]
    np.random.seed(2025)  # get_boxes.py's seed, fresh per case
    boxes = {c: {k: int(v) for k, v in space["mask3D_to_bbox"](gts == c, name).items()} for c in classes}
    own = {c: standin.first_prediction(standin.model_region(gts, c), boxes[c]) for c in classes}
    clicks_cls = [{"fg": [], "bg": []} for _ in classes]
    clicks_order: list[list] = [[] for _ in classes]
    out = {"case": name, "spacing": list(spacing), "classes": {}, "dice": [], "nsd": []}
    per_class = {c: {"box": boxes[c], "clicks": [], "dice": [], "nsd": []} for c in classes}
    for step in range(6):
        if step:
            segs = _segs(own, gts.shape)
            space["click_block"](segs, gts, clicks_cls, clicks_order, False)
            for ind, c in enumerate(classes):
                kind = clicks_order[ind][-1]
                click = None if kind is None else {"zyx": [int(v) for v in clicks_cls[ind][kind][-1]], "kind": kind}
                per_class[c]["clicks"].append(click)
                if click is not None:
                    own[c] = standin.corrected(own[c], gts == c, tuple(click["zyx"]))
        segs = _segs(own, gts.shape)
        dsc = space["compute_multi_class_dsc"](gts, segs)
        nsd = space["compute_multi_class_nsd"](gts, segs, spacing) if dsc > 0.2 else 0.0  # the script's gate
        out["dice"].append(float(dsc))
        out["nsd"].append(float(nsd))
        for c in classes:  # each class alone through the same functions (a map holding only that class)
            only_gts, only_segs = np.where(gts == c, gts, 0), np.where(segs == c, segs, 0)
            per_class[c]["dice"].append(float(space["compute_multi_class_dsc"](only_gts, only_segs)))
            per_class[c]["nsd"].append(float(space["compute_multi_class_nsd"](only_gts, only_segs, spacing))
                                       if dsc > 0.2 else 0.0)
    trapezoid = space["integrate"].cumulative_trapezoid
    out["dsc_auc"] = float(trapezoid(np.array(out["dice"][-5:]), np.arange(5))[-1])
    out["nsd_auc"] = float(trapezoid(np.array(out["nsd"][-5:]), np.arange(5))[-1])
    out["classes"] = {str(c): per_class[c] for c in classes}
    return out


def _segs(own: dict, shape: tuple) -> np.ndarray:
    segs = np.zeros(shape, np.uint8)
    for value in sorted(own):  # label order: a later class over an earlier one
        segs[own[value]] = value
    return segs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--challenge", type=Path, required=True, help="scratch folder with the challenge's files")
    parser.add_argument("--shared", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--out", type=Path, default=ROOT / "tests" / "data" / "cvpr25_reference" /
                        "multiclass_outputs.json")
    args = parser.parse_args()
    space = _namespace(args.challenge.resolve())
    cases = [run_case(space, name, args.shared) for name in standin.CASES]
    args.out.write_text(json.dumps({"cases": cases}, indent=1) + "\n")
    print(f"wrote {args.out}: " + ", ".join(f"{c['case']} final DSC {c['dice'][-1]:.4f}" for c in cases))


if __name__ == "__main__":
    main()

"""Colours a reader can tell apart (core, no Qt): the roles that share a canvas, measured.

Distance is CIEDE2000 (scikit-image) between sRGB colours, for normal vision and for full
deuteranopia and protanopia simulated with Machado, Oliveira & Fernandes (2009), severity 1.0,
applied in linear RGB. The colours are :mod:`napari_medsam_eval.core.palette`'s, and no other module
of the package may define one.
"""
from __future__ import annotations

import ast
import itertools
import re
from pathlib import Path

import numpy as np
import pytest
from skimage.color import deltaE_ciede2000, rgb2lab

from napari_medsam_eval.core import palette
from napari_medsam_eval.core.palette import (AGREEMENT_BINS, CANVASES, GROUND_TRUTH_PALETTE, HIGHLIGHT,
                                             PREDICTION, PREDICTION_PALETTE, hex_to_rgb)

PACKAGE = Path(palette.__file__).resolve().parents[1]

#: Machado et al. 2009, severity 1.0: linear RGB -> what a dichromat sees (linear RGB)
DEUTERANOPIA = np.array([[0.367322, 0.860646, -0.227968],
                         [0.280085, 0.672501, 0.047413],
                         [-0.011820, 0.042940, 0.968881]])
PROTANOPIA = np.array([[0.152286, 1.052583, -0.204868],
                       [0.114503, 0.786281, 0.099216],
                       [-0.003882, -0.048116, 1.051998]])
VISIONS = {"normal": None, "deuteranopia": DEUTERANOPIA, "protanopia": PROTANOPIA}

#: least CIEDE2000 between two roles on one canvas. A difference of 1 is about the smallest one sees
#: between two patches side by side; a canvas asks more: a thin contour or a small point must be
#: *named* from a legend, apart from the rest of the image. Okabe and Ito's own set, made for that,
#: keeps its closest pair (orange / yellow) 21.7 apart for normal vision and 11.6 for a deuteranope
#: (12.2 for a protanope: blue / reddish purple), so the thresholds ask that much of every pair: 20
#: for normal vision, 10 for a simulated dichromat (whose colours lie on one blue-yellow axis).
MIN_NORMAL = 20.0
MIN_SIMULATED = 10.0
#: labels 2, 3, ... of the ground truth and of a prediction (other organs) against the roles of other
#: meaning: as far for normal vision, and still noticeable (5) for a dichromat; their own role's
#: colour (label 1) keeps the full distance above
MIN_LABEL_SIMULATED = 5.0

#: the colours before the palette (0.1.0), kept to show the check finds what the review found
OLD = {"ground truth": "#00BFFF", "prediction": "#FFA500", "TP": "#00FF00", "FP": "#FF00FF", "FN": "#00FFFF",
       "worst run": "#FFFFFF", "positive point": "#00FF00", "negative point": "#FF0000", "box": "#FFFF00"}
OLD_GROUND_TRUTH_PALETTE = ("#00BFFF", "#3CB371", "#4169E1", "#40E0D0", "#9370DB", "#87CEFA", "#2E8B57", "#6A5ACD")


def _linear(rgb: np.ndarray) -> np.ndarray:
    return np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)


def _srgb(linear: np.ndarray) -> np.ndarray:
    linear = np.clip(linear, 0.0, 1.0)
    return np.where(linear <= 0.0031308, 12.92 * linear, 1.055 * linear ** (1 / 2.4) - 0.055)


def seen(color: str, vision: str) -> np.ndarray:
    """sRGB (0..1) of ``color`` as a reader with ``vision`` sees it."""
    rgb = np.asarray(hex_to_rgb(color))
    matrix = VISIONS[vision]
    return rgb if matrix is None else _srgb(matrix @ _linear(rgb))


def delta_e(a: str, b: str, vision: str = "normal") -> float:
    lab_a, lab_b = (rgb2lab(seen(c, vision)[None, None, :])[0, 0] for c in (a, b))
    return float(deltaE_ciede2000(lab_a, lab_b))


def closest(colors: dict[str, str], vision: str) -> tuple[float, str, str]:
    """The closest pair of ``colors`` (by name) for ``vision``: (distance, name, name)."""
    return min((delta_e(colors[x], colors[y], vision), x, y) for x, y in itertools.combinations(colors, 2))


def test_the_colour_science():
    """The pieces against known values: white/black 100 apart, a colour's distance to itself 0, a
    dichromat simulation leaves grey grey and makes red and green alike."""
    assert delta_e("#FFFFFF", "#000000") == pytest.approx(100.0, abs=1e-3)
    assert delta_e("#0072B2", "#0072B2", "protanopia") == pytest.approx(0.0, abs=1e-6)
    for vision in ("deuteranopia", "protanopia"):
        np.testing.assert_allclose(seen("#808080", vision), hex_to_rgb("#808080"), atol=2e-3)
        assert delta_e("#FF0000", "#00FF00", vision) < delta_e("#FF0000", "#00FF00") / 2


def pairs_too_close(canvases: dict[str, dict[str, str]], vision: str) -> list[str]:
    """The pairs of roles on one canvas closer than the threshold for ``vision``."""
    least = MIN_NORMAL if vision == "normal" else MIN_SIMULATED
    return [f"{canvas}: {a} / {b} {distance:.1f}" for canvas, roles in canvases.items()
            for a, b in itertools.combinations(roles, 2)
            if (distance := delta_e(roles[a], roles[b], vision)) < least]


def labels_too_close(canvases: dict[str, dict[str, str]], palettes: dict[str, tuple[str, ...]],
                     vision: str) -> list[str]:
    """Labels 2, 3, ... of each of ``palettes`` (by role) closer than allowed to a role of other meaning."""
    least = MIN_NORMAL if vision == "normal" else MIN_LABEL_SIMULATED
    found = []
    for own, labels in palettes.items():
        for label, color in enumerate(labels[1:], start=2):
            found += [f"{own} label {label} / {role} ({canvas}) {distance:.1f}"
                      for canvas, roles in canvases.items() for role, other in roles.items()
                      if role != own and (distance := delta_e(color, other, vision)) < least]
    return found


@pytest.mark.parametrize("vision", list(VISIONS))
def test_roles_on_one_canvas_are_apart(vision):
    assert pairs_too_close(CANVASES, vision) == []


@pytest.mark.parametrize("vision", list(VISIONS))
def test_other_labels_keep_clear_of_the_other_roles(vision):
    palettes = {"ground truth": GROUND_TRUTH_PALETTE, "prediction": PREDICTION_PALETTE}
    assert labels_too_close(CANVASES, palettes, vision) == []
    if vision == "normal":  # a truth's fill is never a prediction's contour colour
        pairs = itertools.product(GROUND_TRUTH_PALETTE, PREDICTION_PALETTE)
        assert min(delta_e(t, p) for t, p in pairs) >= MIN_NORMAL


@pytest.mark.parametrize("vision", list(VISIONS))
def test_the_agreement_map_bins_and_the_contours_over_them(vision):
    """Neighbouring bins are told apart, and the prediction's and the worst run's contours show on
    every bin (drawn over the map; the brief's floor for a mark on a fill: 10 normal, 5 dichromat)."""
    least = 10.0 if vision == "normal" else 5.0
    colors = [color for _low, color in AGREEMENT_BINS]
    assert min(delta_e(a, b, vision) for a, b in zip(colors, colors[1:])) >= least
    assert min(delta_e(c, line, vision) for c in colors for line in (PREDICTION, HIGHLIGHT)) >= least
    lows = [low for low, _color in AGREEMENT_BINS]
    assert lows[0] == 0.0 and lows == sorted(lows) and lows[-1] < 1.0


def test_the_old_colours_fail_the_check():
    """What the review saw, measured: the checks above fail for the colours before the palette."""
    canvases = {"compare": OLD}
    assert "compare: TP / positive point 0.0" in pairs_too_close(canvases, "normal")  # one lime, two meanings
    assert "compare: ground truth / FP 4.6" in pairs_too_close(canvases, "deuteranopia")  # deep sky blue, magenta
    assert "compare: TP / box 4.1" in pairs_too_close(canvases, "protanopia")  # lime, yellow
    # FN cyan and the ground truth's blues: 8.6 from label 4's turquoise. Label 1's deep sky blue alone
    # measures 23.9 (normal), 16.9 (deuteranopia), 19.2 (protanopia): CIEDE2000 passes that one pair, the
    # likeness the review saw is of the truth's family of cyan-blues the FN cyan sat among
    old_labels = labels_too_close(canvases, {"ground truth": OLD_GROUND_TRUTH_PALETTE}, "normal")
    assert "ground truth label 4 / FN (compare) 8.6" in old_labels
    assert delta_e(OLD["FN"], OLD["ground truth"]) == pytest.approx(23.9, abs=0.05)


@pytest.mark.parametrize("vision", list(VISIONS))
def test_the_error_parts_keep_apart_from_each_other_and_what_is_drawn_with_them(vision):
    """The "why" layer's five parts (two colours beyond Okabe-Ito's) against each other, the truth, the
    prediction and the prompts, and against the other labels' colours, as a canvas's roles are."""
    assert pairs_too_close({"why it failed": palette.WHY_CANVAS}, vision) == []
    palettes = {"ground truth": GROUND_TRUTH_PALETTE, "prediction": PREDICTION_PALETTE}
    assert labels_too_close({"why it failed": palette.WHY_CANVAS}, palettes, vision) == []
    assert set(palette.ERROR_PART_COLORS.values()) <= set(palette.WHY_CANVAS.values())


def test_the_palette_is_okabe_ito():
    allowed = set(palette.OKABE_ITO) | {palette.WHITE}
    roles = {color for roles in CANVASES.values() for color in roles.values()}
    assert roles <= allowed and set(palette.COLOR_NAMES) == allowed
    assert palette.color_name(palette.FALSE_NEGATIVE) == "reddish purple"


def test_the_palette_is_plain_data():
    """No Qt, no napari, nothing but the standard library: every room may import it."""
    tree = ast.parse(Path(palette.__file__).read_text(encoding="utf-8"))
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert imported <= {"__future__"}


#: a colour written in code: a hex code, a matplotlib cycle or tableau name, a colour or colormap name
_COLOR_LITERAL = re.compile(
    r"""["'](#[0-9a-fA-F]{3,8}|tab:\w+|C\d|white|black|red|green|blue|lime|orange|yellow|magenta|cyan|purple|"""
    r"""grey|gray|pink|chartreuse|inferno|viridis|magma|cividis)["']""")


#: modules that name colours without drawing them: the palette, and the reader of colour masks (hue groups)
_NOT_DRAWING = {Path("core", "palette.py"), Path("io", "colour_masks.py")}


def test_no_module_defines_a_colour_of_its_own():
    """One definition: every colour is the palette's (the report page's neutral CSS greys aside)."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.relative_to(PACKAGE) in _NOT_DRAWING:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if _COLOR_LITERAL.search(line):
                found.append(f"{path.relative_to(PACKAGE)}:{number}: {line.strip()}")
    assert found == []

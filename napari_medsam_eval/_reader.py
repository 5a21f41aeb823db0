"""napari reader: any file or folder the core reads, as image (+ ground-truth labels) layers.

Thin: :func:`napari_medsam_eval.datasets.ground_truth_pairing.open_path` decides what a path
is (an image with the ground truth its dataset layout pairs with it, a ground
truth alone, a dataset folder's first case); this module turns the result into
napari layer data with ``scale`` from the spacing.

Accepting and refusing: npe2 calls :func:`napari_get_reader` only for paths
matching the manifest's patterns (every suffix of
:mod:`napari_medsam_eval.io.formats`, and folders). A path with one of our
suffixes, or a folder, is accepted even when its content is wrong (a text file
named ``.nii.gz``): the returned reader then raises our
:class:`~napari_medsam_eval.core.errors.DataError` ("<file>: is a text file, not a
gzip-compressed NIfTI file"), which napari shows, where returning None would only
give napari's "... refused the file" with no reason.

Which reader opens a file is the user's choice: napari's builtin reader claims ``*.nii.gz``, ``*.npz`` ...
and every folder too, so napari asks which reader to use (its dialog has a "remember" box, which writes
the choice into ``plugins.extension2reader`` for that kind of file only). The plugin never writes napari's
settings itself: it names no pattern, and never every folder (``*/``).
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from .core.errors import DataError
from .io.formats import (IMAGE2D_SUFFIXES, NPZ_SUFFIXES, SITK_SUFFIXES, VIDEO_SUFFIXES, content_problem,
                         format_suffix, is_dicom_file_marked)

if TYPE_CHECKING:  # the reading code is imported when a file is read, on a thread (:func:`read_layers`)
    from .core.case import Case
    from .datasets.ground_truth_pairing import GroundTruthFile, Opened

LayerData = tuple[Any, dict[str, Any], str]

#: the plugin's name in napari (``name`` in napari.yaml)
PLUGIN_NAME = "napari-medsam-eval"
#: Case.metadata keys (ITK order) that place a mask on the source image's grid; a DICOM series' folder and UID
#: too, so that a prediction can be saved as a DICOM SEG on it (``_writer``)
GEOMETRY_KEYS = ("spacing_xyz", "origin", "direction", "dicom_series_folder", "dicom_series_id")
#: every file suffix the reader accepts (listed as patterns in napari.yaml)
READER_SUFFIXES = SITK_SUFFIXES + NPZ_SUFFIXES + IMAGE2D_SUFFIXES + VIDEO_SUFFIXES


def case_to_layer_data(case: Case) -> list[LayerData]:
    """Image layer (and Labels layer when the case has ground truth) for napari."""
    from ._layer_style import ground_truth_kwargs

    scale = list(case.spacing.values)
    # the file's geometry travels with the layers so that our writer can save
    # a mask that overlays the source image in other viewers
    geometry = {key: case.metadata[key] for key in GEOMETRY_KEYS if case.metadata.get(key) is not None}
    image_kwargs = {"name": case.case_id, "scale": scale, "rgb": case.has_channels,
                    "metadata": {"case_id": case.case_id, "kind": case.kind, "modality": case.modality,
                                 "geometry": geometry}}
    layers: list[LayerData] = [(case.image, image_kwargs, "image")]
    if case.label is not None:
        label_meta = {"label_names": case.label_names, "role": "ground_truth", "kind": case.kind,
                      "geometry": geometry}
        if case.metadata.get("targets"):  # a SEG's segments / an RTSTRUCT's ROIs: number -> the values it unites
            label_meta["targets"] = {t.key: (t.name, t.labels) for t in case.metadata["targets"]}
        layers.append((case.label, {"name": f"{case.case_id} ground truth", "scale": scale,
                                    "metadata": label_meta, **ground_truth_kwargs()}, "labels"))
    return layers


def ground_truth_layer_data(ground_truth: GroundTruthFile) -> LayerData:
    """A ground truth opened by itself, as a Labels layer on its file's grid."""
    from ._layer_style import ground_truth_kwargs

    metadata = {"label_names": ground_truth.label_names, "role": "ground_truth", "kind": ground_truth.kind,
                "geometry": ground_truth.geometry, "label_path": str(ground_truth.path)}
    return (ground_truth.label, {"name": ground_truth.path.name, "scale": list(ground_truth.spacing.values),
                                 "metadata": metadata, **ground_truth_kwargs()}, "labels")


def opened_to_layer_data(opened: Opened) -> list[LayerData]:
    """The layers of what :func:`open_path` found; a dataset folder's case says which dataset it came from."""
    if opened.ground_truth is not None:
        return [ground_truth_layer_data(opened.ground_truth)]
    assert opened.case is not None
    layers = case_to_layer_data(opened.case)
    if opened.layout is not None:
        layers[0][1]["metadata"].update(dataset_layout=opened.layout, dataset_cases=opened.n_cases)
    return layers


def napari_get_reader(path: str | list[str]) -> Callable[[str], list[LayerData]] | None:
    """:func:`read_layers` for a folder or a file with one of our suffixes, else None.

    Cheap (names only): whether the content is readable is for :func:`read_layers`
    to say, with a message naming the file and the problem.
    """
    if isinstance(path, list):
        if len(path) != 1:
            return None
        path = path[0]
    path = Path(path)
    if not path.exists():
        return None
    if not (path.is_dir() or format_suffix(path) in READER_SUFFIXES or is_dicom_file_marked(path)):
        return None
    return read_layers


def read_layers(path: str | list[str]) -> list[LayerData]:
    """The layers at ``path`` (see :mod:`napari_medsam_eval.datasets.ground_truth_pairing`); a :class:`DataError`
    naming the file and the problem when it cannot be read."""
    if isinstance(path, list):
        path = path[0]
    path = Path(path)
    problem = content_problem(path) if path.is_file() else None
    if problem is not None:
        raise DataError(problem, path)
    from ._meanwhile import in_turns, meanwhile

    return in_turns(meanwhile(lambda: _read(path), f"reading {path.name}"), path=str(path), reader_plugin=PLUGIN_NAME)


def _read(path: Path) -> list[LayerData]:
    """:func:`read_layers`' work, on any thread: the file read, its layers' data, napari's layer kinds warmed."""
    from ._meanwhile import warm_layer_kinds
    from .datasets.ground_truth_pairing import Opened, open_path, read_ground_truth
    from .io.dicom_objects import ground_truth_kind

    if ground_truth_kind(path):  # a DICOM SEG or RTSTRUCT by itself: a ground truth on the series beside it
        layers = opened_to_layer_data(Opened(ground_truth=read_ground_truth(path)))
    else:
        layers = opened_to_layer_data(open_path(path))
    warm_layer_kinds()
    return layers

"""The one data model: a :class:`Case` is an image, its labels and its geometry.

Axis order is fixed by the case's ``kind`` and is always the numpy order of
``image`` (slowest axis first):

=========  ==========================  ================
kind       ``image`` axes              spatial axes
=========  ==========================  ================
volume     ``Z, Y, X``                 ``z, y, x``
video      ``T, Y, X`` or ``T, Y, X, C``  ``t, y, x``
image      ``Y, X`` or ``Y, X, C``     ``y, x``
=========  ==========================  ================

``label`` is an integer map of the spatial shape (no channel axis), 0 being
background. ``spacing`` is a :class:`Spacing` whose values are in the same
order as the spatial axes. Files use other orders (NIfTI, SimpleITK and the
MedSAM npz ``spacing`` key are ``x, y, z``), so a :class:`Spacing` can only be
made through constructors that say which order they are given, and a Case
refuses a spacing whose axes do not match its kind. Passing a bare tuple is an
error, never a silent guess.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Sequence

import numpy as np
from .errors import InputError, InputTypeError
from .reprs import clip_words, html_facts, one_line, shape_words, values_words

CaseKind = Literal["volume", "video", "image"]

#: spatial axis names, in array order, for each kind of case
SPATIAL_AXES: dict[str, str] = {"volume": "zyx", "video": "tyx", "image": "yx"}
#: the kinds of case (and of image a session works on)
KINDS: tuple[str, ...] = tuple(SPATIAL_AXES)


def infer_kind(shape: tuple[int, ...], rgb: bool = False, hint: str | None = None) -> str:
    """The Case kind of an image of ``shape``: ``hint`` when it fits, else guessed.

    2D (or 2D RGB) -> ``image``; 3D grey -> ``volume``; 4D RGB -> ``video``.
    A 3D grey stack hinted ``video`` stays a video.
    """
    spatial = len(shape) - (1 if rgb else 0)
    if hint in KINDS:
        expected = 2 if hint == "image" else 3
        if spatial != expected:
            raise InputError(f"a {hint} needs {expected} spatial dimensions, got shape {tuple(shape)} (rgb={rgb})")
        return hint
    if hint is not None:
        raise InputError(f"kind must be one of {KINDS}, got {hint!r}")
    if spatial == 2:
        return "image"
    if spatial == 3:
        return "video" if rgb else "volume"
    raise InputError(f"an image to segment must be 2D or 3D (plus colour), got shape {tuple(shape)}")


def present_label_values(label_map: np.ndarray) -> list[int]:
    """The foreground label values (> 0) present in ``label_map``, ascending, as ints."""
    return [int(v) for v in np.unique(np.asarray(label_map)) if v > 0]

@dataclass(frozen=True)
class Spacing:
    """Voxel/pixel spacing in mm (frames for ``t``), tagged with its axis order.

    Build it with :meth:`from_array_order` (values already in the case's array
    order) or :meth:`from_xyz` (values in NIfTI/ITK/npz order, reversed here).

    Example::

        spacing = Spacing.from_xyz((0.8, 0.8, 2.5))     # Spacing(z=2.5, y=0.8, x=0.8)
        spacing["z"], spacing.values, spacing.xyz()      # 2.5, (2.5, 0.8, 0.8), (0.8, 0.8, 2.5)
    """

    values: tuple[float, ...]
    axes: str

    def __post_init__(self) -> None:
        if len(self.values) != len(self.axes):
            raise InputError(f"spacing {self.values} has {len(self.values)} values for axes {self.axes!r}")
        if any(not np.isfinite(v) or v <= 0 for v in self.values):
            raise InputError(f"spacing must be positive and finite, got {self.values}")

    @classmethod
    def from_array_order(cls, values: Sequence[float], axes: str) -> "Spacing":
        """Spacing whose ``values`` are already in the order of ``axes`` (e.g. 'zyx')."""
        return cls(tuple(float(v) for v in values), axes)

    @classmethod
    def from_xyz(cls, values_xyz: Sequence[float], axes: str | None = None) -> "Spacing":
        """Spacing from ``(x, y[, z])`` order, as NIfTI, SimpleITK and MedSAM npz store it.

        ``axes`` names the array axes the reversed values belong to; by default
        ``'zyx'`` for three values and ``'yx'`` for two (use ``'tyx'`` for a video).
        """
        reversed_values = tuple(float(v) for v in values_xyz)[::-1]
        if axes is None:
            axes = {3: "zyx", 2: "yx"}.get(len(reversed_values), "")
        return cls(reversed_values, axes)

    @classmethod
    def isotropic(cls, axes: str, value: float = 1.0) -> "Spacing":
        """Unit (or given) spacing on every axis, for data that carries none."""
        return cls(tuple(float(value) for _ in axes), axes)

    def xyz(self) -> tuple[float, ...]:
        """The values in ``x, y[, z]`` order, for SimpleITK and NIfTI writers."""
        return self.values[::-1]

    def __getitem__(self, axis: str) -> float:
        return self.values[self.axes.index(axis)]

    def __iter__(self):
        return iter(self.values)

    def __len__(self) -> int:
        return len(self.values)

    def __repr__(self) -> str:
        inner = ", ".join(f"{a}={v:g}" for a, v in zip(self.axes, self.values))
        return f"Spacing({inner})"


@dataclass
class Case:
    """One image with its (optional) ground truth and geometry.

    ``metadata`` is free-form; readers fill these keys when they know them:
    ``origin`` and ``direction`` (ITK order: x, y, z and a row-major 3x3 or 2x2
    matrix), ``label_names`` ({value: name}), ``image_path``, ``label_path``,
    ``boxes`` (MedSAM npz), ``frame_names`` (videos), ``spacing_xyz`` (the
    file's own spacing, ITK order, used by writers and geometry checks),
    ``fps`` (video files), ``dicom_series_id``, ``mask_encoding`` and
    ``label_source_values`` (how 2D masks became labels, e.g. {1: 255}),
    ``mask_paths`` and ``overlap_pixels`` (one mask file per object),
    ``alpha_dropped``, ``replaced_embedded_label``, ``intensity`` ("prepared" when
    the format defines its values as prepared 0..255, e.g. the MedSAM npz; see
    :mod:`napari_medsam_eval.core.intensity`).

    It prints as a line of facts, never its arrays
    (``Case('image', volume 40x96x96 int16, spacing=(z=2.5, y=0.8, x=0.8), labels=[1, 2, 3])``).

    Example::

        case = api.read_case("sample_data/phantom_ct/image.nii.gz", "sample_data/phantom_ct/label.nii.gz")
        case.image.shape, case.spacing, case.label_values()    # (40, 96, 96), Spacing(z=2.5, ...), [1, 2, 3]
    """

    image: np.ndarray
    label: np.ndarray | None
    spacing: Spacing
    kind: CaseKind
    case_id: str
    modality: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in SPATIAL_AXES:
            raise InputError(f"kind must be one of {sorted(SPATIAL_AXES)}, got {self.kind!r}")
        if not isinstance(self.spacing, Spacing):
            raise InputTypeError(
                "Case.spacing must be a Spacing (Spacing.from_array_order or Spacing.from_xyz), "
                f"not {type(self.spacing).__name__}: a bare tuple hides its axis order"
            )
        expected_axes = SPATIAL_AXES[self.kind]
        if self.spacing.axes != expected_axes:
            raise InputError(f"a {self.kind} case needs spacing in {expected_axes!r} order, got {self.spacing!r}")
        self.image = np.asarray(self.image)
        self._check_image_shape()
        if self.label is not None:
            self.label = np.asarray(self.label)
            if self.label.shape != self.spatial_shape:
                raise InputError(
                    f"case {self.case_id}: label shape {self.label.shape} != image spatial shape {self.spatial_shape}"
                )
            if not np.issubdtype(self.label.dtype, np.integer) and self.label.dtype != bool:
                raise InputTypeError(f"case {self.case_id}: label must be an integer array, got {self.label.dtype}")

    def _check_image_shape(self) -> None:
        ndim = self.image.ndim
        allowed = {"volume": (3,), "video": (3, 4), "image": (2, 3)}[self.kind]
        if ndim not in allowed:
            raise InputError(f"case {self.case_id}: a {self.kind} image must have {allowed} dims, got shape {self.image.shape}")
        if self.has_channels and self.image.shape[-1] not in (3, 4):
            raise InputError(f"case {self.case_id}: channel axis must hold 3 or 4 values, got shape {self.image.shape}")

    @property
    def has_channels(self) -> bool:
        """True when the last image axis is colour (video ``T,Y,X,C`` or image ``Y,X,C``)."""
        return (self.kind == "video" and self.image.ndim == 4) or (self.kind == "image" and self.image.ndim == 3)

    @property
    def spatial_shape(self) -> tuple[int, ...]:
        """Shape of the image without its channel axis; the label's shape."""
        return tuple(self.image.shape[:-1] if self.has_channels else self.image.shape)

    @property
    def axes(self) -> str:
        """Spatial axis names in array order, e.g. ``'zyx'``."""
        return SPATIAL_AXES[self.kind]

    @property
    def label_names(self) -> dict[int, str]:
        return dict(self.metadata.get("label_names", {}))

    @property
    def origin(self) -> tuple[float, ...]:
        """The position of the first voxel's centre in mm, ITK order (``x, y[, z]``), as the file's header
        gives it (``metadata["origin"]``); zeros when the file has none."""
        origin = self.metadata.get("origin")
        if origin is None or len(origin) != len(self.spacing):
            return (0.0,) * len(self.spacing)
        return tuple(float(v) for v in origin)

    @property
    def direction(self) -> tuple[tuple[float, ...], ...]:
        """The direction cosines as a matrix of rows, ITK order (``x, y[, z]``; the identity when the file
        has none): column ``j`` is the world direction of array axis ``x, y, z``'s ``j``."""
        n = len(self.spacing)
        flat = self.metadata.get("direction")
        if flat is None or len(flat) != n * n:
            return tuple(tuple(float(i == j) for j in range(n)) for i in range(n))
        flat = [float(v) for v in np.asarray(flat, dtype=float).ravel()]
        return tuple(tuple(flat[i * n:(i + 1) * n]) for i in range(n))

    def geometry(self) -> dict[str, tuple[float, ...]]:
        """ITK-order ``spacing`` (the file's own, else :attr:`spacing`'s), ``origin`` and flat ``direction``: what a
        SimpleITK image (``SetSpacing``, ``SetOrigin``, ``SetDirection``) or a NIfTI header of this case takes."""
        spacing = self.metadata.get("spacing_xyz")
        if spacing is None or len(spacing) != len(self.spacing):
            spacing = self.spacing.xyz()
        return {"spacing": tuple(float(v) for v in spacing), "origin": self.origin,
                "direction": tuple(v for row in self.direction for v in row)}

    def to_sitk(self, array: np.ndarray | None = None) -> Any:
        """``array`` (a mask or label map of the case's spatial shape; default: the image) as a SimpleITK image
        with the case's geometry (:meth:`geometry`), so it lies on the case's image in any viewer; a bool mask
        becomes ``uint8``. SimpleITK is imported here, not before.

        Example::

            sitk.WriteImage(case.to_sitk(result.mask), "mask.nii.gz")    # api.write_mask also checks the file
        """
        values = self.image if array is None else np.asarray(array)
        shape = tuple(values.shape[:-1]) if array is None and self.has_channels else tuple(values.shape)
        if shape != self.spatial_shape:
            raise InputError(f"case {self.case_id}: an array of shape {tuple(values.shape)} does not fit the case's "
                             f"{shape_words(self.spatial_shape)} grid")
        return sitk_image(values.astype(np.uint8) if values.dtype == bool else values, self.geometry(),
                          vector=array is None and self.has_channels)

    def label_values(self) -> list[int]:
        """Foreground label values present in ``label`` (sorted; empty without a label)."""
        return [] if self.label is None else present_label_values(self.label)

    def n_slices(self) -> int:
        """Number of 2D slices/frames along the first axis (1 for a 2D image)."""
        return 1 if self.kind == "image" else int(self.image.shape[0])

    def __repr__(self) -> str:
        """``Case('liver_3', volume 35x51x35 int16, spacing=(z=2.5, y=0.8, x=0.8), labels=[1, 2], modality=CT)``:
        under 200 characters whatever its size (never the arrays)."""
        named = {"spacing": repr(self.spacing).removeprefix("Spacing"), "labels": self._labels_words()}
        if self.modality:
            named["modality"] = str(self.modality)
        return one_line("Case", [repr(clip_words(self.case_id, 40)), self._image_words()], named)

    def _repr_html_(self) -> str:
        facts = {"kind": self.kind, "image": self._image_words(), "spacing": repr(self.spacing),
                 "labels": self._labels_words(), "modality": self.modality or "-"}
        names = self.label_names
        if names:
            facts["label names"] = ", ".join(f"{k}: {v}" for k, v in sorted(names.items()))
        return html_facts(f"Case {self.case_id}", facts)

    def _image_words(self) -> str:
        colour = f" ({self.image.shape[-1]} channels)" if self.has_channels else ""
        return f"{self.kind} {shape_words(self.spatial_shape)}{colour} {self.image.dtype}"

    def _labels_words(self) -> str:
        if self.label is None:
            return "none"
        return values_words(_present_values_fast(self.label))


def sitk_image(array: np.ndarray, geometry: dict[str, Any], vector: bool = False) -> Any:
    """A SimpleITK image from a numpy (z, y, x) array and ITK-order ``spacing`` / ``origin`` / ``direction``
    (each left at ITK's default when None or of another dimension); ``vector``: the last axis is colour.
    SimpleITK is imported here, not before (the core reads no files)."""
    import SimpleITK as sitk

    image = sitk.GetImageFromArray(array, isVector=vector)
    dim = image.GetDimension()
    if geometry.get("spacing") is not None:
        image.SetSpacing(tuple(float(v) for v in geometry["spacing"])[:dim])
    if geometry.get("origin") is not None and len(geometry["origin"]) == dim:
        image.SetOrigin(tuple(float(v) for v in geometry["origin"]))
    if geometry.get("direction") is not None and len(geometry["direction"]) == dim * dim:
        image.SetDirection(tuple(float(v) for v in geometry["direction"]))
    return image


def _present_values_fast(label: np.ndarray) -> list[int]:
    """:func:`present_label_values`, counted with ``bincount`` where the values allow it (a repr stays quick
    on a large volume: no sort)."""
    flat = np.asarray(label).ravel()
    if flat.size == 0:
        return []
    if flat.dtype == bool or (np.issubdtype(flat.dtype, np.unsignedinteger) and flat.dtype.itemsize <= 2):
        counts = np.bincount(flat.view(np.uint8) if flat.dtype == bool else flat)
        return [int(v) for v in np.flatnonzero(counts) if v > 0]
    if np.issubdtype(flat.dtype, np.integer) and 0 <= flat.min() and flat.max() < 1 << 20:
        return [int(v) for v in np.flatnonzero(np.bincount(flat)) if v > 0]
    return present_label_values(flat)

"""Interactive segmentation and failure analysis without Qt: what the napari widgets drive.

A :class:`Session` holds one model backend and one prepared image (a volume
``Z, Y, X``, a video ``T, Y, X[, C]`` or a 2D image) and answers the three
questions of an interactive run, each with the same core functions a
benchmark uses::

    from napari_medsam_eval.session.session import Session
    session = Session(build_backend("litemedsam", device="cpu"))
    session.set_image(case.image, kind=case.kind, modality=case.modality, image_id=case.case_id)
    prompt = session.prompt_from_ground_truth(case.label, target_label=1, protocol="medsam2")
    slice_mask = session.segment_slice(prompt).mask           # one slice, (H, W)
    result = session.propagate(prompt)                        # whole volume/video, PropagationResult
    result = yield from session.iter_propagate(prompt)        # the same, yielding (done, total)
    result = session.correct(fix)                             # a prompt on a wrong slice, propagated again

Intensities are prepared once per image with
:func:`napari_medsam_eval.core.intensity.prepare_image` (uint8 passes through
unchanged). Slices are cached by the backend under ``(image_id, index)``, the
key :func:`napari_medsam_eval.propagation.propagate_volume` uses for
``case_id=image_id``, so after the first encode a slice is answered by the
decoder alone, whether it is segmented on its own or during a propagation.

:meth:`Session.iter_propagate` turns the core's plain progress callback into
a generator that yields ``(done, total)`` and returns the
:class:`PropagationResult`: the run itself goes on in a helper thread, so a
GUI worker can yield progress while it waits, and stopping the generator (or
setting its cancel event) cancels the run at the next slice.

A session is also the model a GUI drives (napari-animation's split: the
model never imports Qt, the widget owns one and connects to its psygnal
events). It keeps what an interactive run needs to remember - which model
spec its backend was built from (:meth:`Session.has_backend`), the last
ground-truth prompt (:meth:`Session.resolve_prompt`), the last propagation's
result - and emits :attr:`~Session.backend_changed`,
:attr:`~Session.prompt_changed`, :attr:`~Session.slice_ready` and
:attr:`~Session.result_ready`. Events are emitted on the thread that makes
the change: the long calls run in workers and emit nothing; a GUI hands
their results to :meth:`Session.publish_slice` / :meth:`Session.publish` on
its own thread, where the handlers may change layers.

Corrections: a propagation of a volume or video starts an
:class:`~napari_medsam_eval.propagation.anchors.AnchoredSegmentation` whose only
anchor is its prompt; :meth:`Session.correct` / :meth:`Session.iter_correct` add a
prompt on a wrong slice to it (that slice is segmented again and propagated up to the
neighbouring anchors) and :meth:`Session.anchors` lists the anchors. Each target label keeps
its own (several objects); they are dropped when the backend changes. Each image keeps its own too:
switching to another image and back brings them back, with the image's slice-cache id
(:mod:`.kept_images`).

A quick first look (:mod:`.first_look`, :meth:`Session.set_first_look`): the model at a cheaper precision
segments until encoding ahead has every slice with the backend; each result's ``made_by`` says which.

The objects of a session (each one's ground-truth prompt, possibly from a region of several labels,
and its anchors, image by image) are :class:`~.objects.SessionObjects`, the part of :class:`Session`
defined in :mod:`.objects`; each object keeps its own mask there, nested or overlapping.

This module is ~460 lines on purpose (582 before the objects went to :mod:`.objects`): :class:`Session`
is the one object the Segment widget drives (napari-animation's model), with one thread and event
contract (the class docstring); each remaining method is a short call into the core.
"""
from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass, field
from typing import Any, Generator, Hashable

import numpy as np
from psygnal import Signal

from ..core.case import infer_kind
from ..core.intensity import prepare_image
from ..models.base import SegmentationBackend, SegmentResult
from ..core.progress import ProgressBar, SliceProgress, iterate_progress, until_cancelled
from ..core.prompt import Prompt, check_prompt_in_image, expect_prompt
from ..propagation import DEFAULT_MARGIN, PropagationResult, resolve_rules, segment_by_kind
from ..studies.sensitivity import (DEFAULT_RUNS, Perturbation, SensitivityResult, iter_sensitivity, perturbed_prompts,
                                   volume_segmenter)
from .first_look import FirstLook
from .kept_images import KeptImage, KeptImages
from .objects import SessionObjects, same_geometry
from .target_anchors import TargetAnchors
from ..core.errors import InputError


class NoModelError(RuntimeError):
    """A session was asked to segment before a backend was set."""


class NoImageError(RuntimeError):
    """A session was asked to segment before an image was set."""


@dataclass
class Session(SessionObjects):
    """One backend and one prepared image; segments slices and propagates prompts.

    Thread use: a GUI runs the long calls (:meth:`set_image`,
    :meth:`segment_slice`, :meth:`propagate`/:meth:`iter_propagate`) in one
    worker at a time (an image named with :meth:`use_image` is prepared
    there, by the first call that needs it) and calls :meth:`cancel` from
    any thread; it makes the calls that emit events (:meth:`set_backend`,
    :meth:`prompt_from_ground_truth`, :meth:`publish_slice`, :meth:`publish`)
    on its own thread.

    Example (``napari_medsam_eval.api.open_session`` makes one for a case)::

        session = Session(build_backend("litemedsam"))
        session.set_image(case.image, kind=case.kind, modality=case.modality, image_id=case.case_id)
        result = session.propagate(prompt)          # then session.correct(fix), session.anchors(label)
    """

    #: the backend was set: the new one (or None)
    backend_changed = Signal(object)
    #: :meth:`prompt_from_ground_truth` made a prompt (remembered as :attr:`gt_prompt`)
    prompt_changed = Signal(object)
    #: a slice was segmented: its prompt, its bool mask ``(H, W)`` and what made it (:meth:`publish_slice`)
    slice_ready = Signal(object, object, str)
    #: a propagation ended, cancelled or not: its :class:`PropagationResult` (:meth:`publish`)
    result_ready = Signal(object)

    backend: SegmentationBackend | None = None
    margin: int = DEFAULT_MARGIN
    image_id: str = "image"
    kind: str | None = None
    volume: np.ndarray | None = field(default=None, repr=False)
    #: what the backend was built from (e.g. a GUI's ``(model, checkpoint, device)``), see :meth:`has_backend`
    backend_spec: Hashable = None
    #: the last prompt :meth:`prompt_from_ground_truth` made
    gt_prompt: Prompt | None = field(default=None, repr=False)
    #: the last published propagation result (cancelled ones included)
    last_result: PropagationResult | None = field(default=None, repr=False)
    _raw: Any = field(default=None, repr=False)
    _raw_key: tuple | None = field(default=None, repr=False)
    _pending: tuple | None = field(default=None, repr=False)  # (image, set_image kwargs) named by use_image
    _base_id: str = field(default="image", repr=False)
    _generation: int = field(default=0, repr=False)
    _cancel: threading.Event = field(default_factory=threading.Event, repr=False)
    #: each target label's anchors and mask (volumes/videos), see :meth:`correct`
    _targets: TargetAnchors = field(default_factory=TargetAnchors, repr=False)
    #: the images set before this one, each with its anchors and image_id (:mod:`.kept_images`)
    _kept: KeptImages = field(default_factory=KeptImages, repr=False)
    _lock: threading.RLock = field(default_factory=threading.RLock, repr=False)
    #: the quick first look and what encoding ahead finished (:meth:`set_first_look`, :mod:`.first_look`)
    first_look: FirstLook = field(default_factory=FirstLook, repr=False)

    # -- model and image ----------------------------------------------------

    @staticmethod
    def build_backend(name: str, checkpoint: str | None = None, device: str | None = None,
                      precision: str | None = None, **options: Any) -> SegmentationBackend:
        """:func:`napari_medsam_eval.models.build_backend` with the options a user gives in a GUI
        (an empty checkpoint means the model's default; ``precision`` other than fp32: LiteMedSAM's)."""
        from ..models import build_backend

        if precision not in (None, "fp32"):
            if name != "litemedsam":
                raise InputError(f"precision {precision} applies to litemedsam only, not {name}")
            options["precision"] = precision
        if checkpoint:
            options["checkpoint"] = str(checkpoint)
        if device and device != "auto":
            options["device"] = device
        return build_backend(name, **options)

    def set_backend(self, backend: SegmentationBackend | None, spec: Hashable = None) -> None:
        """Use ``backend`` (built from ``spec``, for :meth:`has_backend`); emits :attr:`backend_changed`."""
        self.backend, self.backend_spec = backend, spec
        self._targets.drop()
        self._kept.drop_anchors()
        self.first_look.drop()
        self.backend_changed.emit(backend)

    def has_backend(self, spec: Hashable) -> bool:
        """Whether a backend is set and was built from ``spec``."""
        return self.backend is not None and self.backend_spec == spec

    def set_first_look(self, backend: SegmentationBackend | None) -> None:
        """Use ``backend`` (the same model at a cheaper precision; None: none) for a quick first look
        (:mod:`.first_look`) until this image's slices are all encoded ahead with :attr:`backend`; an image
        named by :meth:`use_image` is prepared first (the first look is for it)."""
        if self._pending is not None:
            self._need_image()
        self.first_look.set(backend)

    @property
    def model_name(self) -> str | None:
        """The backend's registry name (None without one)."""
        return None if self.backend is None else getattr(self.backend, "name", None)

    @property
    def image_name(self) -> str:
        """The ``image_id`` the image was set with (:attr:`image_id` without its ``@n`` suffix)."""
        return self._base_id

    def set_image(
        self,
        image: np.ndarray,
        *,
        kind: str | None = None,
        rgb: bool = False,
        modality: str | None = None,
        window: str | tuple[float, float] | None = None,
        image_id: str | None = None,
    ) -> np.ndarray:
        """Prepare ``image`` for the model (uint8 by the challenge rule) and keep it.

        Setting the same array again (same object, kind, modality, window and
        ``image_id``) does nothing, so a GUI can call this before every job.
        Every newly prepared image gets a distinct :attr:`image_id` (``image_id``,
        then ``image_id@2``, ...): it keys the backend's slice cache. The image
        left is kept with its anchors (:mod:`.kept_images`): setting it again
        (the same array, prepared alike, the same ``image_id``) brings them back,
        with its :attr:`image_id`. Returns the prepared array.
        """
        self._pending = None
        kind = infer_kind(np.shape(image), rgb, kind)
        key = (kind, rgb, modality, window if not isinstance(window, list) else tuple(window))
        base = str(image_id) if image_id is not None else self._base_id
        if self._raw is image and self._raw_key == key and self.volume is not None and base == self._base_id:
            return self.volume
        kept = self._kept.take(base, image, key)
        prepared = kept.volume if kept is not None and kept.volume is not None else prepare_image(
            image, kind, modality, window)
        if self.volume is not None and base != self._base_id:  # the image left keeps its anchors
            self._kept.keep(self._base_id, KeptImage(self._raw, self._raw_key, self.kind, self.image_id,
                                                     self._targets, self.volume))
        self.volume, self.kind, self._raw, self._raw_key = prepared, kind, image, key
        self._base_id = base
        self.first_look.drop()
        if kept is not None:  # back to an image set before: its anchors and cache id
            self._targets, self.image_id = kept.targets, kept.image_id
            return prepared
        self._targets = TargetAnchors()
        self._generation += 1
        # unique per prepared image: backends without a pixel fingerprint (SAM, SAM2) never
        # answer a new image from an old one's cache entry
        self.image_id = base if self._generation == 1 else f"{base}@{self._generation}"
        return prepared

    def use_image(self, image: np.ndarray, **kwargs: Any) -> None:
        """:meth:`set_image` deferred: the next call that needs the image prepares it.

        A GUI names its image on its own thread (cheap) and the preparation
        happens in the worker that segments or propagates.
        """
        self._pending = (image, kwargs)

    @property
    def n_slices(self) -> int:
        if self._pending is not None:  # known without preparing the image
            image, kwargs = self._pending
            kind = infer_kind(np.shape(image), kwargs.get("rgb", False), kwargs.get("kind"))
            return 1 if kind == "image" else int(np.shape(image)[0])
        self._need_image()
        return 1 if self.kind == "image" else int(self.volume.shape[0])

    @property
    def lock(self) -> threading.RLock:
        """Held around every model call: another thread's call (encoding ahead) waits for it."""
        return self._lock

    def slice_image(self, index: int | None) -> np.ndarray:
        """The prepared 2D slice/frame ``index`` (the image itself for a 2D image)."""
        self._need_image()
        if self.kind == "image":
            return self.volume
        if index is None:
            raise InputError(f"a {self.kind} needs a slice index")
        index = int(index)
        if not 0 <= index < self.volume.shape[0]:
            raise InputError(f"slice index {index} is outside the {self.kind} (0..{self.volume.shape[0] - 1})")
        return self.volume[index]

    def cache_key(self, index: int | None) -> Hashable:
        """The backend cache key of a slice: the one propagation uses for it."""
        return (self.image_id, 0 if index is None else int(index))

    # -- segmentation -------------------------------------------------------

    def segment_slice(self, prompt: Prompt, slice_index: int | None = None) -> SegmentResult:
        """Segment one slice (``slice_index``, default ``prompt.slice_index``) from ``prompt``."""
        prompt = expect_prompt(prompt, "Session.segment_slice")
        index = prompt.slice_index if slice_index is None else slice_index
        image = self.slice_image(index)
        prompt = check_prompt_in_image(prompt, image.shape[:2])
        self._need_backend()
        with self._lock:
            backend, words = self.segmenter()
            return dataclasses.replace(backend.segment(image, prompt, cache_key=self.cache_key(index)), made_by=words)

    def cancel(self) -> None:
        """Ask the running propagation to stop after its current slice (sets its cancel event)."""
        self._cancel.set()

    @property
    def cancel_requested(self) -> bool:
        return self._cancel.is_set()

    def propagate(
        self,
        prompt: Prompt,
        *,
        progress: SliceProgress | bool | None = None,
        cancel: threading.Event | None = None,
        margin: int | None = None,
        **options: Any,
    ) -> PropagationResult:
        """Segment the whole volume (both ways) or video (forward) from ``prompt`` (one :class:`api.Prompt`);
        returns an :class:`api.PropagationResult` (its ``mask``, where each direction stopped, ``slice_dice``).

        ``progress``: ``True`` draws a progress bar (tqdm's, a widget in a notebook); a callable
        ``progress(done, total)`` is called after each slice, and returning False stops the run there, as
        setting ``cancel`` (a :class:`threading.Event`; by default a new one that :meth:`cancel` sets) does:
        the result then holds the partial mask and ``cancelled``. ``margin`` and ``options`` (``z_limits``,
        ``stop_when_empty``, ``rules``) change the propagation (docs/propagation.md); a 2D image is segmented
        once. A complete run of a volume or video starts a new anchored segmentation (:meth:`correct`) whose
        only anchor is ``prompt``.
        """
        prompt = expect_prompt(prompt, "Session.propagate")
        if progress is True:
            with ProgressBar("propagating", "slice") as bar:
                return self.propagate(prompt, progress=bar, cancel=cancel, margin=margin, **options)
        self._need_image()
        self._need_backend()
        token = cancel if cancel is not None else threading.Event()
        self._cancel = token
        callback = until_cancelled(progress, token)
        margin = self.margin if margin is None else int(margin)
        with self._lock:  # one model call at a time, even when a cancelled run is ending its slice
            backend, words = self.segmenter()
            if token.is_set():
                empty = np.zeros(self.volume.shape[:2] if self.kind == "image" else self.volume.shape[:3], dtype=bool)
                return PropagationResult(empty, prompt, cancelled=True, made_by=words)
            result = segment_by_kind(backend, self.volume, self.kind, prompt, margin=margin, progress=callback,
                                     case_id=self.image_id, **options)
            result.made_by = words
            if not result.cancelled:  # a cancelled run changes no layer: the anchors that match them stay
                self._start_anchors(backend, prompt, result, margin, options)
            return result

    def _start_anchors(self, backend: SegmentationBackend, prompt: Prompt, result: PropagationResult,
                       margin: int, options: dict[str, Any]) -> None:
        """A new anchored segmentation of ``result`` for its target (:class:`TargetAnchors`), with the
        rules this run resolved; a 2D image, an unplaced prompt or a one-slice run starts none."""
        self._targets.drop(prompt.target_label)
        if (self.kind not in ("volume", "video") or prompt.slice_index is None
                or options.get("how", "propagate") != "propagate"):
            return
        rules = resolve_rules(self.kind, options.get("rules"), margin=margin,
                              stop_when_empty=options.get("stop_when_empty"), min_iou=options.get("min_iou"))
        self._targets.start(backend, self.volume, self.kind, self.image_id, prompt, result, rules)

    def correct(
        self,
        prompt: Prompt,
        *,
        progress: SliceProgress | bool | None = None,
        cancel: threading.Event | None = None,
        truth: np.ndarray | None = None,
        **options: Any,
    ) -> PropagationResult:
        """Add ``prompt`` on its slice to the current anchored segmentation and propagate from there.

        :meth:`AnchoredSegmentation.correct <napari_medsam_eval.propagation.anchors.AnchoredSegmentation.correct>`:
        the returned result's ``mask`` is the whole updated mask. Without an anchored
        segmentation of this image, backend and target label (or on a 2D image) this is
        :meth:`propagate` (``options`` go to it). ``cancel`` / ``progress`` (``True``: a bar) as in
        :meth:`propagate`; a cancelled correction changes neither the mask nor the anchors
        (the result then holds the kept mask and ``cancelled``). Where the target's ground truth is known
        (``truth``, a bool mask of the image; by default the one its prompt was made from with
        :meth:`prompt_from_ground_truth`) the result is a
        :class:`~napari_medsam_eval.propagation.anchors.CorrectionResult`: the DSC before and after, and its
        summary says when the correction lowered it.
        """
        prompt = expect_prompt(prompt, "Session.correct")
        if progress is True:
            with ProgressBar("correcting", "slice") as bar:
                return self.correct(prompt, progress=bar, cancel=cancel, truth=truth, **options)
        self._need_image()
        self._need_backend()
        token = cancel if cancel is not None else threading.Event()
        self._cancel = token
        with self._lock:
            anchored = self._targets.current(self.first_look.owners(self.backend), self.image_id, prompt.target_label)
            if anchored is None or anchored.mask is None:
                return self.propagate(prompt, progress=progress, cancel=token, **options)
            if token.is_set():
                return PropagationResult(anchored.mask.copy(), prompt, cancelled=True)
            result = self._targets.correct(anchored, prompt, until_cancelled(progress, token), truth)
            result.made_by = self.first_look.made_by(anchored.backend)  # the backend that made its anchors
            return result

    def iter_propagate(
        self, prompt: Prompt, *, cancel: threading.Event | None = None, **kwargs: Any
    ) -> Generator[tuple[int, int], None, PropagationResult]:
        """:meth:`propagate` as a generator: yields ``(done, total)`` after every
        slice and returns the :class:`PropagationResult` (``StopIteration.value``,
        or ``result = yield from session.iter_propagate(...)``).

        The run goes on in a helper thread while the generator waits for its
        progress, so whoever iterates can hand each step on (a napari
        ``thread_worker`` yields it to the GUI). Setting ``cancel`` (or
        :meth:`cancel`) ends it after the current slice with a cancelled
        result; closing the generator early cancels the run too (its helper
        thread ends after the current slice; the session's lock holds the next
        model call until then).
        """
        token = cancel if cancel is not None else threading.Event()
        self._cancel = token
        return (yield from iterate_progress(
            lambda progress: self.propagate(prompt, progress=progress, cancel=token, **kwargs),
            token, name="medsam-eval-propagation"))

    def iter_sensitivity(
        self, prompt: Prompt, runs: int = DEFAULT_RUNS, *, ground_truth: np.ndarray | None = None,
        perturbation: Perturbation = Perturbation(), cancel: threading.Event | None = None, **options: Any,
    ) -> Generator[tuple[int, int], None, SensitivityResult]:
        """Prompt sensitivity (:mod:`napari_medsam_eval.studies.sensitivity`): ``prompt`` perturbed ``runs``
        times, each copy propagated as :meth:`propagate` would (same cache: decoder passes only once
        the slices are encoded); keeps no anchor. Yields ``(runs done, runs)``; ``ground_truth`` (the
        target's bool mask) gives each run's DSC; ``cancel`` stops after the current slice."""
        self._need_image()
        self._need_backend()
        backend, words = self.segmenter()
        hw = self.volume.shape[:2] if self.kind == "image" else self.volume.shape[1:3]
        prompts = perturbed_prompts(prompt, hw, runs, perturbation, key=str(self.image_id))
        segment = volume_segmenter(backend, self.volume, self.kind, case_id=self.image_id, lock=self._lock,
                                   cancel=cancel, margin=self.margin, **options)
        result = yield from iter_sensitivity(segment, prompts, ground_truth, cancel)
        result.made_by = words  # the backend chosen above made every run (a first look's says so)
        return result

    def iter_correct(
        self, prompt: Prompt, *, cancel: threading.Event | None = None, **kwargs: Any
    ) -> Generator[tuple[int, int], None, PropagationResult]:
        """:meth:`correct` as a generator, as :meth:`iter_propagate` is :meth:`propagate`'s."""
        token = cancel if cancel is not None else threading.Event()
        self._cancel = token
        return (yield from iterate_progress(
            lambda progress: self.correct(prompt, progress=progress, cancel=token, **kwargs),
            token, name="medsam-eval-propagation"))

    # -- results (on the GUI's thread) -------------------------------------------

    def publish_slice(self, prompt: Prompt, mask: np.ndarray, made_by: str = "") -> None:
        """Hand a segmented slice (and what made it) to whoever listens: emits :attr:`slice_ready`."""
        self.slice_ready.emit(prompt, np.asarray(mask, dtype=bool), made_by)

    def publish(self, result: PropagationResult) -> None:
        """Keep ``result`` as :attr:`last_result` and emit :attr:`result_ready`."""
        self.last_result = result
        self.result_ready.emit(result)

    # -- checks ---------------------------------------------------------------

    def segmenter(self) -> tuple[SegmentationBackend, str]:
        """The backend that segments this image now (the first look or :attr:`backend`,
        :meth:`FirstLook.choose <.first_look.FirstLook.choose>`) and its ``made_by`` words."""
        self._need_image()
        return self.first_look.choose(self._need_backend(), self.image_id, self.n_slices)

    def _need_backend(self) -> SegmentationBackend:
        if self.backend is None:
            raise NoModelError("no model loaded: load one first")
        return self.backend

    def _need_image(self) -> None:
        if self._pending is not None:
            image, kwargs = self._pending
            self.set_image(image, **kwargs)
        if self.volume is None:
            raise NoImageError("no image set: choose an image first")


__all__ = [
    "NoImageError",
    "NoModelError",
    "Session",
    "same_geometry",
]

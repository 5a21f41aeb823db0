"""Colour (RGB/RGBA) mask files: one foreground colour is a binary mask, several colours are classes.

Reading a colour mask as grey (luminance) keeps some classes and drops
others: an artery/vein map in red, blue, white and green has luminances 76,
29, 255 and 150, so binarising at half keeps white and green and silently
loses red and blue. Here a colour mask is judged by its colours first
(:func:`colour_mask`):

* **grey** (R = G = B everywhere, or nearly so: spread of at most
  :data:`GREY_SPREAD`, the noise of a re-saved JPEG): channel 0 / luminance,
  then the grey mask rules, as before;
* **one colour on black** (every coloured pixel a shade of one hue, the
  shades being anti-aliased edges): a binary mask, label 1 where the colour
  is brighter than half its brightest pixel;
* **several colours**: they stand for classes. No layout here declares a
  colour table, so the mask is refused, naming the colours found (hex and
  pixel counts); store class numbers (a grey or palette PNG) instead.

Alpha: a transparent pixel (alpha 0) is background; a mask drawn only in its
alpha channel (one RGB colour everywhere) is read from the alpha channel.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..core.errors import DataError

#: largest channel spread (max - min) of a colour still taken as grey
GREY_SPREAD = 24
#: channel value below which a colour is too dark to have a hue (black, edge blending into black)
DARK = 32
#: hue bins per unit of each channel's share of the colour's brightest channel
_HUE_STEPS = 4
#: share of the coloured pixels a hue needs to count in a lossy (JPEG) mask, whose edges ring in colours
_LOSSY_SHARE = 0.01
#: colours a refusal lists
_SHOWN = 8


def _hex(colour: np.ndarray) -> str:
    return "#" + "".join(f"{int(c):02x}" for c in colour[:3])


def _drop_alpha(pixels: np.ndarray) -> np.ndarray:
    """RGB of an RGBA mask: transparent pixels black, or the alpha channel when it holds the mask."""
    rgb, alpha = pixels[..., :3], pixels[..., 3]
    if np.all(alpha == alpha.flat[0]):
        return rgb
    if np.all(rgb == rgb.reshape(-1, 3)[0]):  # one colour everywhere: the shape is in the alpha channel
        return np.repeat(alpha[..., None], 3, axis=-1)
    return np.where(alpha[..., None] == 0, 0, rgb).astype(rgb.dtype)


def _colours(rgb: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct colours ``(n, 3)``, their pixel counts, and each pixel's index into them."""
    flat = rgb.reshape(-1, 3).astype(np.int64)
    packed = (flat[:, 0] << 32) | (flat[:, 1] << 16) | flat[:, 2]
    values, inverse, counts = np.unique(packed, return_inverse=True, return_counts=True)
    colours = np.stack([values >> 32, (values >> 16) & 0xFFFF, values & 0xFFFF], axis=1)
    return colours, counts, inverse


def _hue_key(colour: np.ndarray, bright: int, lossy: bool) -> tuple:
    """Which hue a colour has: its channels as shares of the brightest, in quarters (exact files: a
    shade of one colour keeps its shares), or, for a lossy file, the nearest of six 60-degree hue
    sectors (red, yellow, green, cyan, blue, magenta), wide enough for JPEG's colour bleeding."""
    if not lossy:
        return tuple(int(v) for v in np.rint(colour / bright * _HUE_STEPS))
    r, g, b = (float(v) for v in colour)
    low = min(r, g, b)
    if bright == r:
        hue = 60 * ((g - b) / (bright - low))
    elif bright == g:
        hue = 60 * (2 + (b - r) / (bright - low))
    else:
        hue = 60 * (4 + (r - g) / (bright - low))
    return ("hue", int(round(hue / 60)) % 6)


def _hue_groups(colours: np.ndarray, counts: np.ndarray, lossy: bool) -> dict[tuple, list[int]]:
    """Indices of the colours of each hue (coloured: not grey, not dark), plus a ``("grey",)`` group of
    the light greys beside them; a lossy mask's hues under :data:`_LOSSY_SHARE` are compression noise."""
    top = colours.max(axis=1)
    spread = top - colours.min(axis=1)
    coloured = (spread > GREY_SPREAD) & (top >= DARK)
    groups: dict[tuple, list[int]] = {}
    for index in np.flatnonzero(coloured):
        groups.setdefault(_hue_key(colours[index], int(top[index]), lossy), []).append(int(index))
    light = np.flatnonzero(~coloured & (top >= 128))
    if light.size:
        groups[("grey",)] = [int(i) for i in light]
    if lossy:
        total = sum(int(counts[i].sum()) for i in groups.values())
        groups = {k: v for k, v in groups.items() if counts[v].sum() >= _LOSSY_SHARE * total}
    return groups


def _refusal(colours: np.ndarray, counts: np.ndarray, groups: dict[tuple, list[int]]) -> str:
    """The classes found: each group's most frequent colour with the group's pixel count, black apart."""
    found = sorted(((int(counts[v].sum()), _hex(colours[max(v, key=lambda i: counts[i])])) for v in groups.values()),
                   reverse=True)
    shown = ", ".join(f"{colour} ({n} px)" for n, colour in found[:_SHOWN])
    more = f" and {len(found) - _SHOWN} more" if len(found) > _SHOWN else ""
    black = int(counts[colours.max(axis=1) < DARK].sum())
    return (f"colour mask holds {len(found)} colours that stand for different classes: {shown}{more} "
            f"(besides {black} px of black); reading it as one grey mask would keep some classes and drop "
            "others. Store class numbers instead (a grey or palette PNG with 0 = background, 1, 2 ...)")


def colour_mask(pixels: np.ndarray, *, lossy: bool, path: str | Path | None
                ) -> tuple[np.ndarray, str | None]:
    """``(values, encoding)`` of an RGB/RGBA mask (see the module doc).

    ``encoding`` is None for a grey mask (``values`` are grey levels for the
    grey mask rules) and names the rule for a one-colour mask (``values`` are
    labels 0/1). A mask of several colours raises :class:`DataError`.
    """
    rgb = _drop_alpha(pixels) if pixels.shape[-1] == 4 else pixels[..., :3]
    if np.array_equal(rgb[..., 0], rgb[..., 1]) and np.array_equal(rgb[..., 0], rgb[..., 2]):
        return rgb[..., 0], None
    colours, counts, inverse = _colours(rgb)
    groups = _hue_groups(colours, counts, lossy)
    if not any(key != ("grey",) for key in groups):
        return _luminance(rgb), None
    if len(groups) > 1:
        raise DataError(_refusal(colours, counts, groups), path)
    brightness = colours.max(axis=1)[inverse].reshape(rgb.shape[:2])
    main = colours[np.argmax(np.where(colours.max(axis=1) >= DARK, counts, -1))]
    labels = (brightness > int(brightness.max()) // 2).astype(np.uint8)
    return labels, f"binary colour mask ({_hex(main)} on black) -> 0/1"


def _luminance(rgb: np.ndarray) -> np.ndarray:
    """PIL's ``convert("L")`` (ITU-R 601-2 luma), for grey masks stored with colour noise."""
    weights = np.array([299, 587, 114])
    return ((rgb.astype(np.int64) @ weights + 500) // 1000).astype(rgb.dtype)

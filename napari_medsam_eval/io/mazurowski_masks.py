"""How Mazurowski et al. 2023 read a mask image (their rule, kept exactly: the 2D prompt-mode study reads
its datasets' masks with it)."""
from __future__ import annotations

import numpy as np


def mazurowski_label_map(gray: np.ndarray) -> np.ndarray:
    """Their mask reading rule applied to a grayscale mask (``cv2.imread(path, 0)``).

    If the maximum is 255 the image is divided by its maximum and truncated to
    uint8, so only pixels of exactly 255 stay foreground (value 1); otherwise it
    is kept as is (a multi-class map 0, 1, 2, ...). A binary dataset's mask is
    then ``result > 0``, class ``k`` of a multi-class one ``result == k``.
    """
    gray = np.asarray(gray)
    if gray.size and gray.max() == 255:
        return (gray / gray.max()).astype(np.uint8)
    return gray

"""Names of the clock alignments across ranks (``--align``), without importing the Timeline."""

from __future__ import annotations

ALIGN_WALL = "wall"
ALIGN_FIRST_SAMPLE = "first-sample"
ALIGN_MARKERS = "markers"
ALIGNMENTS = (ALIGN_WALL, ALIGN_FIRST_SAMPLE, ALIGN_MARKERS)

"""Work arrays reused from rank to rank within one analysis.

A rank of an hour at 10 Hz is 36,000 samples: every temporary the size of a rank is 288 KB, above
the C allocator's threshold for handing memory back to the kernel, so a fresh temporary per
operation page-faults its memory in again each time. On 1,024 ranks that cost more system time
than the arithmetic itself. The passes write into these arrays instead (``out=``), each named by
its one use, so two live intermediates never share memory.

An array handed out is valid until the same name is asked for again (the next rank): results
that outlive a rank (episodes, findings) are always copies.
"""

from __future__ import annotations

import numpy as np


class Scratch:
    """Named, growable work arrays; one instance per analysis (not shared between threads)."""

    def __init__(self) -> None:
        self._arrays: dict[tuple[str, type], np.ndarray] = {}
        # The two kinds asked for most (tens of times per rank) keyed by name alone: at
        # 10,000 short ranks the lookup itself showed in the profile.
        self._floats: dict[str, np.ndarray] = {}
        self._flags: dict[str, np.ndarray] = {}

    def array(self, name: str, n: int, dtype: type = np.float64) -> np.ndarray:
        """The first ``n`` elements of the work array ``name`` (contents undefined)."""
        have = self._arrays.get((name, dtype))
        if have is None or have.shape[0] < n:
            have = np.empty(n, dtype=dtype)
            self._arrays[(name, dtype)] = have
        return have[:n]

    def floats(self, name: str, n: int) -> np.ndarray:
        have = self._floats.get(name)
        if have is None or have.shape[0] < n:
            have = self._floats[name] = np.empty(n, np.float64)
        return have[:n]

    def flags(self, name: str, n: int) -> np.ndarray:
        have = self._flags.get(name)
        if have is None or have.shape[0] < n:
            have = self._flags[name] = np.empty(n, np.bool_)
        return have[:n]

"""First cause on jobs whose ranks all warm up at one shared instant: counts, not timings.

    .venv/bin/python benchmarks/eval_first_cause_shared_warmup.py

Why: an intermediate ``stormotel demo`` put every rank's warm-up at the shared simulated t=0 and
the analyzer named a wrong rank at high. This counts, over the test's generator (2/4/8 ranks,
3 seeds, 1 s and 0.25 s steps), healthy jobs with no incident, healthy jobs naming any rank at
high/medium, faulted jobs naming a wrong rank at high/medium, and faulted jobs naming the
planted leader at high. Results in docs/benchmarks.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stormotel.analyzers.analyze import analyze

from tests.analyzers.synth import to_timeline
from tests.analyzers.test_first_cause_shared_warmup import _fault, shared_warmup_job


def main() -> None:
    clean = named_any = wrong = named = total = 0
    for ranks in (2, 4, 8):
        for seed in (0, 1, 2):
            for period_s in (1.0, 0.25):
                total += 1
                cr = analyze(to_timeline(shared_warmup_job(ranks, seed=seed,
                                                           period_s=period_s))).cross_rank
                clean += not cr.first_cause_suspects and not cr.incidents
                named_any += any(s.confidence in ("high", "medium")
                                 for s in cr.first_cause_suspects) or \
                    any(i["confidence"] in ("high", "medium") for i in cr.incidents)
                owner, faults = _fault(ranks)
                cr = analyze(to_timeline(shared_warmup_job(ranks, faults, seed=seed,
                                                           period_s=period_s))).cross_rank
                s = cr.first_cause_suspects
                wrong += any(x.rank != owner and x.confidence in ("high", "medium") for x in s) \
                    or any(i["confidence"] in ("high", "medium") and i["leader"] != owner
                           for i in cr.incidents)
                named += bool(s) and s[0].rank == owner and s[0].confidence == "high"
    print(f"healthy: no incident {clean}/{total}, a rank at high/medium {named_any}/{total}; "
          f"faulted: wrong rank at high/medium {wrong}/{total}, planted leader at high "
          f"{named}/{total}")


if __name__ == "__main__":
    main()

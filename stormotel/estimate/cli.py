"""``stormotel estimate``: will this training step fit, before the job is ever scheduled?"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from stormotel import exitcodes
from stormotel.argtypes import checked, positive_int
from stormotel.errors import StormotelError, exit_code_of
from stormotel.units import UnitError, parse_bytes

_EPILOG = """\
The factory is a function, importable as package.module:function (the current directory is on
the import path), that returns (model, optimizer, batch). The estimator runs
model(batch) / model(*batch) / model(**batch), sums the output unless it is already a scalar
loss, calls backward() and optimizer.step(), for --iterations iterations.

exit codes: 0 estimated (and fits, when --device-memory is given), 1 estimated but does not
fit, 2 bad arguments / factory / model (message says which), 4 the output file cannot be written.

examples:
  stormotel estimate examples.estimate_models:mlp_adam --device-memory 80GiB
  stormotel estimate examples.estimate_models:transformer_adamw --format json --output est.json
  stormotel estimate mypkg.train:build --mode real      # also measures tracker accuracy
"""


def _byte_size(text: str) -> int:
    try:
        return parse_bytes(text)
    except UnitError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="stormotel estimate",
        description="Predict the peak memory of a training step (forward, backward, optimizer "
                    "step) with PyTorch's MemTracker, on fake tensors by default, so nothing is "
                    "allocated and no GPU is needed.",
        epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("factory", metavar="MODULE:FUNC",
                   help="model factory returning (model, optimizer, batch)")
    p.add_argument("--iterations", type=positive_int, default=2, metavar="N",
                   help="training iterations to run; the first creates optimizer state, so "
                        "the peak usually needs two (default: 2)")
    p.add_argument("--mode", choices=("fake", "real"), default="fake",
                   help="fake: FakeTensorMode, no memory allocated (default); real: real "
                        "tensors, and compare the tracker with the allocator's measured peak")
    p.add_argument("--device-memory", type=_byte_size, metavar="SIZE",
                   help="device memory to check the peak against, e.g. 80GiB, 40GB, 1073741824;"
                        " GB is 10^9, GiB 2^30")
    p.add_argument("--depth", type=positive_int, default=2, metavar="N",
                   help="module breakdown depth: 1 = the root model only (default: 2)")
    p.add_argument("--format", choices=("table", "json"), default="table",
                   help="output format (default: table)")
    p.add_argument("--output", type=Path, metavar="FILE",
                   help="write the output to FILE instead of stdout")
    p.add_argument("--round-to", type=_round_to, default=512, metavar="BYTES",
                   help="round every allocation up to this many bytes, as CUDA's caching "
                        "allocator does (default: 512); 1 counts exact tensor bytes")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    return p


#: The largest --round-to: no allocator rounds a block up to more than a device holds (1 TiB);
#: 400 nines estimated every tensor at 10^400 bytes and failed printing it (exit 70).
MAX_ROUND_TO = 2**40


def _round_to(text: str) -> int:
    return checked(text, int, "an integer", lambda v: 1 <= v <= MAX_ROUND_TO,
                   f"must be between 1 and {MAX_ROUND_TO} (1 TiB), got {{value}}")


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    from stormotel.estimate.factory_spec import check_module_exists

    def progress(message: str) -> None:
        if not args.quiet:
            print(f"stormotel estimate: {message}", file=sys.stderr, flush=True)

    try:
        check_module_exists(args.factory)  # a typo is told before torch's import (~4 s of CPU)
        from stormotel.estimate.core import estimate

        est = estimate(args.factory, iterations=args.iterations, mode=args.mode,
                       round_to=args.round_to, depth=args.depth, progress=progress)
    except StormotelError as exc:  # FactoryError, EstimationError: the user's model or flags
        print(f"stormotel estimate: error: {exc}", file=sys.stderr)
        return exit_code_of(exc)
    from stormotel.estimate.report import render_table

    est.device_memory_bytes = args.device_memory
    text = est.to_json() if args.format == "json" else render_table(est)
    if args.output is None:
        try:
            print(text, flush=True)
        except BrokenPipeError:  # `stormotel estimate ... | head`: the reader has enough
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    else:
        try:
            args.output.write_text(text + "\n")
        except OSError as exc:
            print(f"stormotel estimate: error: cannot write {args.output}: "
                  f"{exc.strerror or exc}", file=sys.stderr)
            return exitcodes.SINK_FAILURE
        progress(f"wrote {args.output}")
    return exitcodes.FINDINGS if est.fits is False else exitcodes.OK

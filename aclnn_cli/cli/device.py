"""The device commands: `harness` (write the C++ runner project) and `run` (drive a built runner)."""

from __future__ import annotations

import shlex
import signal
import sys
import threading
from contextlib import contextmanager
from pathlib import Path

import click

from ..casedir import dirs as casedirs, shardout
from ..device.run import MAX_TIMEOUT, SOC_PRODUCTS, RunOptions, check_timeout, run_cases
from .common import one_line_errors, parse_shard, select_cases
from ..errors import UserError
from ..device.harness import select_ops, write_harness
from ..files.options import PATH
from ..report.progress import Progress


def register(main: click.Group) -> None:
    """Add the device commands to the main group."""
    main.add_command(harness)
    main.add_command(run)


@click.command()
@click.option("-o", "--out", "out", type=PATH, required=True, help="Directory for the CMake project.")
@click.option("--op", "op_names", multiple=True, metavar="NAME",
              help="Only this operator (API name or key; repeatable). Default: every registered op.")
def harness(out: Path, op_names: tuple[str, ...]) -> None:
    """Write the C++17 CMake project of the runner that calls the real aclnn API for the registered ops.

    A runner built with --op answers cases of other ops with ERROR (generated without them); use it
    where the toolkit lacks some ops' libraries or headers.
    """
    with one_line_errors():
        files = write_harness(out, select_ops(op_names))
    src, build = shlex.quote(str(out)), shlex.quote(str(out / "build"))
    runner = shlex.quote(str(out / "build" / "aclnn-runner"))
    click.echo(f"wrote {len(files)} files to {out}. Build it where CANN is installed (set_env.sh sourced):\n"
               f"  cmake -S {src} -B {build} && cmake --build {build}\n"
               f"then: aclnn-cli run OUT --runner {runner}; aclnn-cli verify OUT")


def _timeout(value: float) -> float:
    try:
        return check_timeout(value)
    except UserError:
        raise click.BadParameter(f"{value!r}: must be a number of seconds above 0 and at most {MAX_TIMEOUT:g}") \
            from None


@contextmanager
def _signals_interrupt():
    """SIGTERM and SIGHUP (a cancelled CI job, a closed terminal) end `run` as Ctrl-C does: on the way
    out, the runner's process group is killed. (Their default would end Python with the runner alive.)"""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        raise KeyboardInterrupt(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _shard(ctx, param, value):
    return parse_shard(ctx, param, value)  # the same I/N as gen, emulate and verify


@click.command()
@click.argument("out", type=PATH)
@click.option("--runner", type=PATH, required=True, help="The built runner (build/aclnn-runner).")
@click.option("--case", "patterns", multiple=True, metavar="ID", help="Only cases whose id matches (glob; repeatable).")
@click.option("--shard", metavar="I/N", default=None, callback=lambda ctx, param, value: _shard(ctx, param, value),
              help="Only this machine's share of the cases (an OUT from gen --shard: all its cases, checked "
                   "against this).")
@click.option("--device", type=click.IntRange(0, 1 << 20), default=0, show_default=True, help="Device id.")
@click.option("--timeout", type=float, callback=lambda ctx, param, value: _timeout(value), default=120.0,
              show_default=True, help="Seconds one case may take before its runner is killed (TIMEOUT); also "
                                      "the most the runner's start and its end may take.")
@click.option("--product", type=click.Choice(sorted({p for _, p in SOC_PRODUCTS})), default=None,
              help="The device's product, if the SoC name the runtime reports is not one aclnn-cli knows.")
def run(out: Path, runner: Path, patterns: tuple[str, ...], shard: tuple[int, int], device: int, timeout: float,
        product: str | None) -> None:
    """Run the cases under OUT on the device through a built runner, then judge them with 'verify'.

    Cases for another product are left for a device of that product. A case that crashes the
    runner or exceeds --timeout gets a CRASH or TIMEOUT verdict and a fresh runner continues.
    A 'done' answer must agree with the files the runner wrote and the status the case expects
    (else MISSING, STATUS or ERROR). Nothing the runner started is alive when run returns.
    Exit 0 when every case ran and its answer held, 1 when one crashed, timed out, could not run
    or got one of those verdicts (or the runner ended badly, e.g. a sanitizer report, or left
    processes behind), 2 on bad input.
    """

    with one_line_errors(), _signals_interrupt():
        if not runner.is_file():
            raise UserError("no runner here (build it: aclnn-cli harness -o DIR, then cmake)", where=str(runner))
        chosen = shardout.select(out, shard)
        casedirs.refuse_links(out, chosen.dirs)  # (run writes dumps and status files into each)
        manifests, broken = chosen.loaded()
        for case_dir, exc in broken:
            click.echo(f"aclnn-cli: error: {exc}", err=True)
        manifests = select_cases(manifests, patterns)
        opts = RunOptions(runner=runner, device=device, timeout=timeout, product=product)
        with Progress("run", len(manifests), sum(m.output.layout.numel for m in manifests)) as bar:
            summary = run_cases(manifests, opts, on_case=lambda m: bar.advance(m.case_id, m.output.layout.numel))
    statuses = ", ".join(f"{n} returned {s}" for s, n in sorted(summary.statuses.items()))
    click.echo(f"ran {summary.ran} cases on {summary.soc} ({summary.product}) with "
               f"{summary.runners_started} runner process{'es' if summary.runners_started > 1 else ''}"
               + (f": {statuses}" if statuses else ""))
    for case_id, verdict, detail in summary.failed:
        click.echo(f"{verdict:8} {case_id}: {detail.splitlines()[0] if detail else ''}")
    for problem in summary.ending_problems:
        click.echo(f"RUNNER   {problem}")
    if summary.other_products:
        left = ", ".join(f"{p}: {n}" for p, n in sorted(summary.other_products.items()))
        click.echo(f"{sum(summary.other_products.values())} cases are for other products ({left}); "
                   f"run them on those devices")
    click.echo(f"next: aclnn-cli verify {out}")
    sys.exit(2 if broken else 1 if summary.failed or summary.ending_problems else 0)

"""The commands that judge: `verify` (the dumps against their goldens) and `report` (merged verify results), and
how both write their files and print their summary."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import click

from .common import (JOBS, SHARD, broken_pipe, console as _console, one_line_errors as _one_line_errors,
                     quiet_stdout, StandardName)
from ..files.options import PATH, default_jobs


HTML_HELP = ("Write an HTML report here: one offline file with plots of every case (needs matplotlib: "
             "pip install 'aclnn-cli[report]').")


@click.command()
@click.argument("paths", nargs=-1, required=True, type=PATH)
@click.option("--json", "json_path", type=PATH, help="Write the merged results as JSON here.")
@click.option("--junit", "junit_path", type=PATH, help="Write merged JUnit XML here.")
@click.option("--html", "html_path", type=PATH, help=HTML_HELP)
@click.option("--failures-only", is_flag=True, help="List only cases that did not pass (the default; overrides -v).")
@click.option("--strict", is_flag=True, help="MISTRUSTED cases fail the run (by default they are warnings).")
@click.option("-v", "--verbose", is_flag=True, help="List every case, not only those that did not pass.")
def report(paths: tuple[Path, ...], json_path: Path | None, junit_path: Path | None, html_path: Path | None,
           failures_only: bool, strict: bool, verbose: bool) -> None:
    """Merge the verify --json results of several runs (e.g. CI shards) into one summary."""
    from ..report.html import require_matplotlib
    from ..report.merged import read_results
    from ..files.reportpaths import check_output_paths

    console = _console()
    with _one_line_errors():
        if html_path:
            require_matplotlib()
        check_output_paths(json_path, junit_path, html_path)
        run = read_results(list(paths), strict=strict)  # (streamed: a brief row per case in memory)
    _finish(console, run, None, failures_only, json_path, junit_path, verbose=verbose,
            html=(html_path, default_jobs(), "report: merged verify results"))



def _tolerances(rtol: float | None, atol: float | None, pairs: tuple[str, ...]) -> dict[str, float]:
    tol: dict[str, float] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        try:
            tol[key.strip()] = float(value)
        except ValueError:
            raise click.BadParameter(f"expected KEY=NUMBER, got {pair[:60]!r}", param_hint="--tolerance") from None
        if not sep:
            raise click.BadParameter(f"expected KEY=NUMBER, got {pair[:60]!r}", param_hint="--tolerance")
    if rtol is not None:
        tol["rtol"] = rtol
    if atol is not None:
        tol["atol"] = atol
    return tol


@click.command()
@click.argument("out", type=PATH)
@click.option("--standard", type=StandardName(), default=None,
              help="Precision standard for every case (default: each case's own, else mere-mare).")
@click.option("--rtol", type=float, help="Override the standard's relative threshold.")
@click.option("--atol", type=float, help="Override the standard's absolute threshold.")
@click.option("--tolerance", "tolerance", multiple=True, metavar="KEY=VALUE",
              help="Override any parameter of the standard (see docs/verify.md), e.g. T=0.001.")
@click.option("--signed-zeros", is_flag=True, help="Require the sign of zero to match.")
@click.option("--strict", is_flag=True, help="MISTRUSTED cases fail the run (by default they are warnings).")
@click.option("--json", "json_path", type=PATH, help="Write the results as JSON here.")
@click.option("--junit", "junit_path", type=PATH, help="Write JUnit XML here.")
@click.option("--html", "html_path", type=PATH, help=HTML_HELP)
@click.option("--csv-errors", "csv_dir", type=PATH,
              help="Write each failing case's failing elements as CSV into this directory.")
@click.option("--failures-only", is_flag=True, help="List only cases that did not pass (the default; overrides -v).")
@click.option("-v", "--verbose", is_flag=True, help="List every case, not only those that did not pass.")
@click.option("--rehash", is_flag=True, help="Hash every golden and input again, even those whose stat data proves "
              "them unchanged since gen (see docs/verify.md, 'Checksums').")
@JOBS
@SHARD
def verify(out: Path, standard: str | None, rtol, atol, tolerance, signed_zeros: bool, strict: bool,
           json_path: Path | None, junit_path: Path | None, html_path: Path | None, csv_dir: Path | None,
           failures_only: bool, jobs: int, shard, verbose: bool, rehash: bool) -> None:
    """Judge the device dumps under OUT (a directory of cases, or one case) against their goldens."""
    from ..casedir import shardout
    from ..judge.verify import Options, check_run_tolerances, verify_dirs, verify_manifests
    from ..pipeline.forkpool import while_waiting
    from ..report.progress import Progress
    from ..files.reportpaths import check_output_paths

    while_waiting(_load_the_summarys_modules)
    opts = Options(standard=standard, tolerance=_tolerances(rtol, atol, tolerance), signed_zeros=signed_zeros,
                   error_rows=csv_dir is not None, strict=strict, error_data=bool(json_path or html_path),
                   rehash=rehash)
    with _one_line_errors():
        if html_path:
            from ..report.html import require_matplotlib

            require_matplotlib()
        check_output_paths(json_path, junit_path, html_path, csv_dir=csv_dir)
        chosen = shardout.select(out, shard)
        root = out if out.is_dir() and not (out / "case.json").exists() else None  # (a suite: its stat record)
        if chosen.manifests is None and not opts.tolerance:  # nothing to check first: workers read the manifests
            with Progress("verify", len(chosen.dirs), None) as bar:
                run = verify_dirs(chosen.dirs, opts, jobs=jobs, root=root,
                                  on_case=lambda r: bar.advance(r.case_id, math.prod(r.shape)))
        else:
            manifests, broken = chosen.loaded()
            check_run_tolerances(manifests, opts)
            with Progress("verify", len(manifests) + len(broken), sum(m.output.layout.numel for m in manifests)) as bar:
                sizes = {str(m.dir): m.output.layout.numel for m in manifests}
                run = verify_manifests(manifests, broken, opts, jobs=jobs, root=root,
                                       on_case=lambda r: bar.advance(r.case_id, sizes.get(r.path, 0)))
        run.coverage = chosen.coverage  # (what the results must hold, for report: see shard.py)
    _finish(None, run, standard, failures_only, json_path, junit_path, csv_dir, verbose,
            html=(html_path, jobs, "verify report"))


def _load_the_summarys_modules() -> None:
    """Import what printing the summary needs, in the time this process waits for its forked workers (they have
    the cores; a 64M-element verify spent a tenth of its time on these imports after the comparison)."""
    import importlib

    for name in ("rich.console", "rich.table", "aclnn_cli.report.formats"):
        importlib.import_module(name)


def _finish(console, run, standard: str | None, failures_only: bool, json_path: Path | None,
            junit_path: Path | None, csv_dir: Path | None = None, verbose: bool = False,
            html: tuple[Path | None, int, str] = (None, 1, "")) -> None:
    """Write the CI files, then print the cases that did not pass (every case if verbose) and the summary, exit.
    console: where to print (None: the standard output's, made now).
    html: (where the HTML report goes, if anywhere; processes drawing its plots; what made the run).
    The files come first: a closed or full standard output (`| head -1`, /dev/full) must not lose them."""
    from ..report.formats import print_cases, print_summary, write_error_csvs, write_verify_json

    with _one_line_errors():  # (written case by case: thousands of cases are never all held as JSON or XML)
        if json_path:
            write_verify_json(json_path, run, standard)
        if junit_path:
            from ..report.junit import write_junit

            write_junit(junit_path, run)
        if csv_dir:
            write_error_csvs(csv_dir, run)
        if html[0]:
            from ..report.html import write_html

            write_html(html[0], run, standard, jobs=html[1], title=html[2])
    console = console or _console()
    console.on_broken_pipe = broken_pipe  # (rich's own answer is SystemExit(1): a pass would exit 1)
    try:
        print_cases(console, run, show_passing=verbose and not failures_only)
        print_summary(console, run)
        if sys.stdout is not None:  # (an in-process caller's closed stream: the console() entry gives one)
            sys.stdout.flush()
    except BrokenPipeError:  # (the reader went away, as `| head` does: the verdict still stands)
        quiet_stdout()
    except OSError as exc:
        quiet_stdout()
        click.echo(f"aclnn-cli: error: cannot write the summary to standard output: {exc.strerror} (the result "
                   f"files were written)", err=True)
        sys.exit(2)
    sys.exit(run.exit_code)

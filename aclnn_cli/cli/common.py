"""What every command module shares (cli.py, cli_device.py): one-line errors, the console, --jobs,
--shard and --case selection. Below them both, so neither imports the other."""

from __future__ import annotations

import fnmatch
import errno
import os
import sys
from contextlib import contextmanager

import click

from ..errors import UserError
from ..files.options import default_jobs


def parse_shard(ctx, param, value: str | None):
    if value is None:
        return (0, 1)
    try:
        i, n = (int(x) for x in value.split("/"))
    except ValueError:
        raise click.BadParameter("use I/N, e.g. 2/4 (shards are numbered 1..N)") from None
    if not 1 <= i <= n:
        raise click.BadParameter(f"shard {i}/{n}: I must be between 1 and N")
    return (i - 1, n)


MAX_JOBS = 256  # worker processes at most: each holds a Python process's memory (~60 MB); more is a typo
JOBS = click.option("-j", "--jobs", type=click.IntRange(1, MAX_JOBS), default=min(default_jobs(), MAX_JOBS),
                    show_default="number of cores",
                    help=f"Worker processes (at most {MAX_JOBS}, and no more than there is work for); large cases "
                         f"are split into ranges across them.")
SHARD = click.option("--shard", callback=parse_shard, metavar="I/N", default=None,
                     help="Only this runner's share of the cases (balanced by size, each case in exactly one shard). "
                          "gen records it in OUT; emulate, run and verify then take all of OUT's cases and check "
                          "I/N against the record.")


def console():
    """Wide enough for the tables in CI logs, where there is no terminal to size them."""
    from rich.console import Console

    here = Console(highlight=False)
    return here if here.is_terminal else Console(highlight=False, width=160)


def fail(exc: UserError) -> None:
    for line in getattr(exc, "problems", None) or [exc]:  # (report's shard problems: one line each)
        click.echo(f"aclnn-cli: error: {line}", err=True)
    sys.exit(exc.exit_code)


@contextmanager
def one_line_errors():
    """Bad input, a full disk or an unwritable path: one line naming what and where, exit 2."""
    try:
        yield
    except UserError as exc:
        fail(exc)
    except OSError as exc:
        where = exc.filename or ""
        if exc.errno == errno.EMFILE:
            fail(UserError(f"too many open files (the limit is {open_files_limit()}: raise it with ulimit -n)"))
        fail(UserError(exc.strerror or str(exc), where=str(where)))
    except MemoryError:
        fail(UserError("out of memory (is a size in the input beyond reason?)"))
    except ImportError as exc:  # (a module loaded on first use, when no descriptor is left to open it)
        if "Too many open files" not in str(exc):
            raise
        fail(UserError(f"too many open files (the limit is {open_files_limit()}: raise it with ulimit -n)"))


def open_files_limit() -> int:
    """This process's limit on open files, raised first to the hard limit where the soft one is lower (a soft
    limit is a default, not a choice: workers, pipes and storage files each hold descriptors)."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard == resource.RLIM_INFINITY or soft < hard:
            want = 65536 if hard == resource.RLIM_INFINITY else hard
            if soft != resource.RLIM_INFINITY and soft < want:
                resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
                soft = want
        return int(soft)
    except (ImportError, ValueError, OSError):
        return -1


def select_cases(cases, patterns: tuple[str, ...]):
    if not patterns:
        return cases
    chosen = [c for c in cases if any(fnmatch.fnmatchcase(c.case_id, p) for p in patterns)]
    if not chosen:
        raise UserError(f"no case id matches {', '.join(patterns)}")
    return chosen


def broken_pipe() -> None:
    """A rich Console's answer to a closed pipe (rich's own is SystemExit(1), which would turn a pass into 1)."""
    raise BrokenPipeError


def quiet_stdout() -> None:
    """Standard output pointed at /dev/null, so the interpreter's flush at exit does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


class StandardName(click.ParamType):
    """A precision standard's name, checked against standards.py only when an option is given (or
    its help shown): a plain click.Choice would import the judge, and numpy with it, at every start."""

    name = "standard"

    def _names(self) -> list[str]:
        from ..standards.rules import STANDARDS

        return list(STANDARDS)

    def get_metavar(self, *args, **kwargs) -> str:  # (click < 8.2 passes param; 8.2+ param and ctx)
        return f"[{'|'.join(self._names())}]"

    def convert(self, value, param, ctx):
        names = self._names()
        if value in names:
            return value
        self.fail(f"{str(value)[:60]!r} is not one of {', '.join(map(repr, names))}.", param, ctx)


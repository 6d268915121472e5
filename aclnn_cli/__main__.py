"""The aclnn-cli command (and python -m aclnn_cli): the click group, and nothing it started left alive when it
returns (reaper.py). Tests that call the group in-process (click's CliRunner) keep their own children."""

from __future__ import annotations


def console() -> None:
    from .pipeline import reaper
    from .cli.main import main
    from .cli.common import open_files_limit

    reaper.adopt_orphans()
    open_files_limit()
    try:
        main(prog_name="aclnn-cli")
    finally:
        reaper.end_descendants()


if __name__ == "__main__":
    console()

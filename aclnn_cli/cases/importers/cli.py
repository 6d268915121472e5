"""`aclnn-cli convert`: foreign case files -> our YAML, so a team can switch over for good.

The YAML holds exactly the documents direct import builds (same names, seeds, generators), so gen
gives identical bytes either way. Everything is checked before anything is written.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click
import yaml

from ..loader import cases_from_doc
from ...errors import UserError
from ...files.options import PATH
from ...ops import find_op
from ...tensor.storage import atomic_write_text
from . import describe_skipped, import_file
from .source import read_regular

HEADER = ("# Converted by `aclnn-cli convert` from {name} ({fmt}); docs/importing.md maps every field.\n"
          "# Names and seeds derive from the source file's name: gen gives the same bytes as importing it.\n")


_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def to_yaml(doc: dict, source: str, fmt: str) -> str:
    """One case document as YAML text (floats in repr form, so they read back exactly). libyaml's emitter where
    PyYAML has it: three times as fast, and every string reads back as it was (the Python emitter turns U+0085 into a
    space; its long lines fold elsewhere, the values are the same: decision 249)."""
    body = yaml.dump(doc, Dumper=_DUMPER, sort_keys=False, default_flow_style=None, width=120, allow_unicode=True)
    return HEADER.format(name=source, fmt=fmt) + body


def plan(files: tuple[Path, ...], out: Path, skip_unsupported: bool) -> tuple[dict[Path, str], list, int]:
    """(YAML path -> text, skipped cases, number of cases) for every input, each validated as gen would."""
    outputs: dict[Path, str] = {}
    owners: dict[Path, Path] = {}
    skipped: list = []
    count = 0
    for f in files:
        data = read_regular(f)  # only a regular file, at most MAX_FILE_BYTES (never /dev/zero, a FIFO)
        result = import_file(f, data, skip_unsupported, cases_from_doc)
        if result is None:
            raise UserError("not an ATK JSON, TTK CSV or msOpST JSON case file (recognised by content)", where=str(f))
        skipped.extend(result.skipped)
        for doc in result.documents:
            count += len(cases_from_doc(str(f), doc))
            suffix = f".{find_op(doc['op']).key}" if len(result.documents) > 1 else ""
            target = out / f"{f.stem}{suffix}.yaml"
            if target in owners:
                raise UserError(f"{owners[target]} and {f} would both be written to {target}", where=str(f))
            owners[target] = f
            outputs[target] = to_yaml(doc, f.name, result.format)
    return outputs, skipped, count


@click.command()
@click.argument("files", nargs=-1, required=True, type=PATH)
@click.option("-o", "--out", "out", type=PATH, required=True,
              help="Directory for the YAML files.")
@click.option("--skip-unsupported", is_flag=True,
              help="Leave out (and count) cases aclnn-cli cannot express instead of stopping at the first.")
def convert(files: tuple[Path, ...], out: Path, skip_unsupported: bool) -> None:
    """Convert ATK JSON, TTK CSV or msOpST JSON case files into aclnn-cli YAML case files.

    One YAML per input file (per op, if a file mixes ops), named after it. Formats are recognised
    by content, whatever the file is called.
    """
    try:
        outputs, skipped, count = plan(files, out, skip_unsupported)
        for path, text in outputs.items():
            atomic_write_text(path, text)
    except (UserError, OSError) as exc:  # OSError: an unwritable output directory, a full disk
        error = exc if isinstance(exc, UserError) else UserError(exc.strerror or str(exc),
                                                                 where=str(exc.filename or out))
        click.echo(f"aclnn-cli: error: {error}", err=True)
        sys.exit(error.exit_code)
    for line in describe_skipped(skipped):
        click.echo(line, err=True)
    click.echo(f"converted {count} cases from {len(files)} file{'s' if len(files) != 1 else ''} into "
               f"{len(outputs)} YAML file{'s' if len(outputs) != 1 else ''} in {out}")

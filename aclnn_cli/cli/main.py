"""The aclnn-cli command line: parse arguments, call the library, print."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click

from .. import __version__
from ..errors import UserError
from .group import Commands as _Commands
from .common import JOBS, SHARD, console as _console, fail as _fail, one_line_errors as _one_line_errors, select_cases
from ..files.options import PATH
from .verdicts import report, verify

# Every other module is imported by the command that needs it, when it runs: `aclnn-cli --help` (and a
# command's own start) pays for click alone, not for numpy, rich, yaml and every op.

BUNDLED = Path(__file__).resolve().parent.parent / "cases" / "bundled"  # shipped inside the package (pip install .)


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="aclnn-cli")
@click.option("--ops", "op_paths", multiple=True, type=PATH, metavar="PATH",
              help="Load your own op declarations: a .py file, a folder of them or a package (repeatable; "
                   "also ACLNN_CLI_OPS and 'aclnn_cli.ops' entry points). See docs/adding-an-op.md.")
def main(op_paths: tuple[Path, ...]) -> None:
    """Golden data and precision gate for Ascend aclnn operators.

    \b
    gen       YAML cases -> device-layout .bin inputs, goldens, case.json
    emulate   play the device: write the outputs the way the kernels compute
    verify    judge device dumps against the goldens (exit 0 pass, 1 fail, 2 bad input)
    harness   write the C++ runner project that calls the real aclnn API
    run       drive a built runner over the cases (crash and timeout isolated)
    """
    from ..ops import user
    from ..pipeline.tuning import tune_allocator

    tune_allocator()

    with _one_line_errors():
        if op_paths:  # workers (and anything this process starts) load the same files
            known = [p for p in os.environ.get(user.ENV, "").split(os.pathsep) if p]
            os.environ[user.ENV] = os.pathsep.join(known + [_resolved(p) for p in op_paths])
        if os.environ.get(user.ENV):  # user op files: loaded (and their variants checked) now, one line each
            from ..device.defects import catalogue

            user.load_configured()
            catalogue()  # (a user op's variant without its kind: one line now, not at its first emulate)
        # (else ops load when first looked up: entry points with the first read of the whole registry)


def _size(ctx, param, value):
    from ..golden.outdir import parse_size

    try:
        return parse_size(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


@main.command()
@click.argument("paths", nargs=-1, type=PATH)
@click.option("-o", "--out", "out", type=PATH, required=True, help="Output directory.")
@click.option("--case", "patterns", multiple=True, metavar="ID",
              help="Only cases whose id matches (shell pattern, repeatable).")
@click.option("--force", is_flag=True, help="Regenerate even unchanged, intact cases.")
@click.option("--max-bytes", callback=_size, default="64GiB", show_default=True, metavar="SIZE",
              help="Refuse a run that would write more storage than this (e.g. 500G, 2TiB).")
@click.option("--max-case-bytes", callback=_size, default="32GiB", show_default=True, metavar="SIZE",
              help="Refuse a case that would write more storage than this.")
@click.option("--skip-unsupported", is_flag=True,
              help="Leave out (and count) cases of ATK/TTK/msOpST files that aclnn-cli cannot express.")
@JOBS
@SHARD
def gen(paths: tuple[Path, ...], out: Path, patterns: tuple[str, ...], force: bool, max_bytes: int,
        max_case_bytes: int, skip_unsupported: bool, jobs: int, shard) -> None:
    """Generate inputs and goldens for case FILES or DIRS (default: the bundled cases).

    Case files are our YAML, or ATK JSON, TTK CSV and msOpST JSON suites as they are
    (recognised by content; see docs/importing.md).
    """
    from ..casedir import shardout
    from ..cases import importers
    from ..cases.loader import load_cases
    from ..golden.gen import generate_cases
    from ..golden.outdir import SizeLimits
    from ..report.progress import Progress

    with _one_line_errors():
        if not str(out):
            raise UserError("-o/--out needs a directory")
        with importers.collecting(skip_unsupported) as foreign_skipped:
            cases = select_cases(load_cases(list(paths) or [BUNDLED]), patterns)
        for line in importers.describe_skipped(foreign_skipped):
            click.echo(line, err=True)
        if not cases and foreign_skipped:  # (exit 0 with nothing generated would pass a pipeline that generated nothing)
            raise UserError(f"every case was skipped, nothing is left to generate: --skip-unsupported left out all "
                            f"{len(foreign_skipped)} (the reasons above; e.g. {foreign_skipped[0].reason})")
        cases, coverage = shardout.gen_shard(cases, shard, where="--shard")
        shardout.check_gen(out, cases, coverage)
        with Progress("gen", len(cases), sum(c.numel for c in cases)) as bar:
            results = generate_cases(cases, out, jobs=jobs, force=force, limits=SizeLimits(max_case_bytes, max_bytes),
                                     on_done=lambda r: bar.advance(r.case_id, r.elements),
                                     before_cases=coverage and (lambda: shardout.write_record(out, coverage)))
        skipped = sum(r.skipped for r in results)
    click.echo(f"generated {len(cases) - skipped} cases in {out}" + (f", {skipped} unchanged and intact" if skipped else ""))
    uncertain = [r for r in results if r.exact_path.uncertified]
    if uncertain:  # (an op without `exact` whose reference is not rational where its bound straddles a boundary)
        worst = max(uncertain, key=lambda r: r.exact_path.uncertified)
        click.echo(f"warning: {sum(r.exact_path.uncertified for r in uncertain)} golden elements in {len(uncertain)} "
                   f"cases are not certified (the op has no exact function and its reference is not rational there; "
                   f"e.g. {worst.exact_path.uncertified} in {worst.case_id}): they are the float64 value rounded once "
                   f"and may be one ulp off; case.json records them (golden.uncertified_elements)", err=True)


@main.command()
@click.argument("out", type=PATH)
@click.option("--defect", metavar="NAME", default=None,
              help="Emulate a broken kernel (or a legitimate variant): see 'aclnn-cli defects'.")
@click.option("--json", "json_path", type=PATH, default=None,
              help="Write what was emulated (cases, defect, ops whose reference was replayed) as JSON.")
@JOBS
@SHARD
def emulate(out: Path, defect: str | None, jobs: int, shard, json_path: Path | None) -> None:
    """Write every output dump under OUT as the device kernels would compute it."""
    from ..casedir import dirs as casedirs, shardout
    from ..device.emulate import emulate_all, emulate_dirs
    from ..device.defects import find_variant, ops_with_kernel
    from ..report.progress import Progress

    with _one_line_errors():
        if json_path is not None:
            from ..files.reportpaths import check_output_paths

            check_output_paths(json_path)
        try:  # (the catalogue includes user ops' variants, loaded after import: not a fixed Choice)
            variant = find_variant(defect) if defect else None
        except KeyError as exc:
            raise UserError(exc.args[0], where="--defect") from None
        chosen = shardout.select(out, shard)
        casedirs.refuse_links(out, chosen.dirs)  # (emulate writes dumps and status files into each)
        if chosen.manifests is None:  # nothing loaded to choose them: the workers read the manifests themselves
            with Progress("emulate", len(chosen.dirs), None) as bar:
                errors = emulate_dirs(chosen.dirs, variant, jobs, on_done=bar.advance)
            total = len(chosen.dirs)
        else:
            manifests, broken = chosen.loaded()
            total = len(manifests) + len(broken)
            with Progress("emulate", len(manifests), sum(m.output.layout.numel for m in manifests)) as bar:
                errors = [e for _, e in broken] + emulate_all(
                    manifests, variant, jobs, on_done=lambda m: bar.advance(m.case_id, m.output.layout.numel))
    for exc in errors:
        click.echo(f"aclnn-cli: error: {exc}", err=True)
    done = total - len(errors)
    click.echo(f"emulated {done} cases in {out}" + (f" with defect '{defect}'" if defect else "")
               + (f"; {len(errors)} cases have bad files (above)" if errors else ""))
    from ..ops import OPS

    if variant is not None and variant.op_kernel:
        having = ops_with_kernel(variant, OPS.values())
        if len(having) < len(OPS):
            click.echo(f"note: '{defect}' is the kernel of {', '.join(having)} only; "
                       "cases of other ops ran their correct kernel")
    names = {Path(d).name for d in chosen.dirs}
    replayed = sorted(op.name for op in OPS.values() if op.kernel is None and any(
        n.startswith(op.key + "-") for n in names))
    for name in replayed:
        click.echo(f"warning: {name} declares no kernel: emulate replayed its reference (float64 rounded to "
                   f"float32), so this loop cannot catch a wrong golden; give the op a `kernel` or run the device",
                   err=True)
    if json_path is not None:
        from ..tensor.storage import atomic_write_text

        atomic_write_text(json_path, json.dumps({"emulated": done, "errors": len(errors), "defect": defect,
                                                 "replayed_reference": replayed}, indent=1) + "\n")
    sys.exit(2 if errors else 0)


def _resolved(path: Path) -> str:
    """An --ops path made absolute (workers and runners load it from elsewhere), or one line naming it."""
    try:
        return str(path.resolve())
    except OSError as exc:  # (a relative path under a current directory that was removed)
        try:
            os.getcwd()
            why = ""
        except OSError:
            why = " (the current directory no longer exists)"
        raise UserError(f"--ops: cannot find this path: {exc.strerror}{why}", where=str(path)) from None


@main.command()
@click.argument("paths", nargs=-1, type=PATH)
@JOBS
def matrix(paths: tuple[Path, ...], jobs: int) -> None:
    """Print the defect x standard matrix (markdown) over case FILES or DIRS (default: bundled cases/)."""
    import tempfile

    from ..cases.loader import load_cases
    from ..golden.gen import generate_case
    from ..judge.matrix import defect_matrix, markdown, matrix_cases

    try:
        cases = load_cases(list(paths) or [BUNDLED])
        with tempfile.TemporaryDirectory(prefix="aclnn-suite-") as tmp:
            for case in cases:
                generate_case(case, Path(tmp))
            table = defect_matrix(Path(tmp), jobs=jobs)
            click.echo(markdown(table, len(matrix_cases(Path(tmp)))))
    except UserError as exc:
        _fail(exc)


@main.command()
def defects() -> None:
    """List the defects and legitimate variants 'emulate --defect' can play."""
    from rich.table import Table

    from ..device.defects import catalogue

    table = Table(title="emulate --defect")
    for col in ("name", "kind", "what the kernel does"):
        table.add_column(col)
    for v in catalogue().values():
        table.add_row(v.name, "legitimate" if v.legit else "defect", v.description)
    _console().print(table)


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print the operator table as JSON.")
def ops(as_json: bool) -> None:
    """List the operators: signature, dtypes per product, dims, empty, broadcast and mixed-dtype rules."""
    from rich.markup import escape
    from rich.table import Table

    from ..ops import OPS

    data = [op_info(s) for s in OPS.values()]
    if as_json:
        click.echo(json.dumps(data, indent=2))
        return
    table = Table(title="operators (the same data gen checks cases against)", show_lines=True)
    for col in ("op", "signature", "dtypes per product", "dims", "empty", "broadcast", "mixed dtypes", "graph ops"):
        table.add_column(col, overflow="fold")
    for d in data:
        sig = escape(", ".join(_param_text(p, d) for p in d["signature"]))  # ([dtypes] is not markup)
        prods = "\n".join(f"{p}: {' '.join(v)}" for p, v in d["products"].items())
        table.add_row(d["op"], f"({sig})", prods, f"{d['dims'][0]}-{d['dims'][1]}", "yes" if d["empty"] else "no",
                      ", ".join(d["broadcast_on"]) or d["broadcast_into"] or "no", d["mixed_dtypes"],
                      "\n".join(d["graph_ops"]))
    _console().print(table)


def _param_text(name: str, d: dict) -> str:
    """One API argument in the ops table: out* for an output, ? for an optional tensor, [dtypes] for a
    tensor's own list, name: kind for an attribute."""
    t = next((t for t in d["tensors"] if t["name"] == name), None)
    if t is None:
        a = next(a for a in d["attributes"] if a["name"] == name)
        return f"{name}: {a['kind']}" + ("?" if a["optional"] else "")
    own = f" [{' '.join(t['dtypes'])}]" if t["dtypes"] else ""
    return name + ("*" if t["role"] == "output" else "") + ("?" if t["optional"] else "") + own


def op_info(s) -> dict:
    c = s.contract
    mixed = ("promoted (fp16+bf16 -> fp32, any+fp32 -> fp32), cast to the output's dtype" if c.dtypes == "promote"
             else f"on {', '.join(c.mixed_fp32_on)}: gradOutput != self needs a float32 output" if c.mixed_fp32_on
             else "no: all identical")
    from ..ops.graphops import GRAPH_OPS

    return {"op": s.name, "formula": s.formula, "signature": [name for name, _ in s.api_params],
            "graph_ops": sorted(name for name, g in GRAPH_OPS.items() if g.api == s.name),  # (TTK's op_name)
            "tensors": [{"name": t.name, "role": t.role, "read": t.read_by_kernel, "optional": t.optional,
                         "dtypes": list(t.dtypes) if t.dtypes is not None else None} for t in s.tensors],
            "attributes": [{"name": a.name, "kind": a.kind, "optional": a.optional,
                            "default": list(a.default) if isinstance(a.default, tuple) else a.default}
                           for a in s.attributes],
            "products": {p: list(d) for p, d in s.products.items()}, "dims": list(s.dims), "empty": s.empty_ok,
            "broadcast_on": list(c.broadcast_on), "mixed_dtypes": mixed, "special_values": s.special_values,
            # (an output of one input's shape, the others broadcast into it: KlDivBackward's self)
            "broadcast_into": f"into {s.family.output_like}'s shape" if getattr(s.family, "output_like", None) else ""}


main.add_command(report)
main.add_command(verify)

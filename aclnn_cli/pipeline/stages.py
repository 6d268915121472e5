"""The case pipeline that gen, emulate and verify share: one split size, one dispatcher.

Each command is a `Stage`: how to handle a batch of small cases (in one worker, one unit of work)
and how to handle one large case (its output split into ranges over the pool's workers). The
dispatcher owns the rest: how many workers, which cases are split, batching, warming up, and
(for case directories) loading manifests in the workers instead of one serial read.
Within a case, every stage walks the output in `storage.CHUNK` pieces and reads the inputs of
each piece through `gather_inputs`, so all three see the inputs of an output range the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from . import forkpool
from ..casedir import manifest as M
from ..errors import UserError
from ..ops.registry import is_ours
from .parallel import Runner, as_completed, batches, inline_first, jobs_for, paused_gc, worker_died
from ..tensor.storage import StorageFile, chunks

SPLIT = 1 << 22  # a case with more output elements than this is split into ranges across workers
RANGE = SPLIT // 4  # elements per range of a split case


def is_large(elements: int) -> bool:
    return elements > SPLIT


def ranges(elements: int, jobs: int = 0) -> list[tuple[int, int]]:
    """The ranges a large case's output is split into (one per unit of work). jobs: no more than 8 ranges
    per worker, each a multiple of RANGE (verify: a range costs a comparison's set-up, a millisecond or two)."""
    per = max(1, -(-elements // (8 * jobs * RANGE))) if jobs > 0 else 1
    return list(chunks(elements, per * RANGE))


def units(sizes: Sequence[int]) -> int:
    """Units of work for cases of these sizes: one per small case, one per range of a large one."""
    return sum(max(1, n // RANGE) if is_large(n) else 1 for n in sizes)


def gather_inputs(m: M.CaseManifest, files: dict, start: int, stop: int) -> dict[str, np.ndarray]:
    """The inputs of output elements [start, stop), by tensor name (broadcast and strided views applied).

    files: tensor name -> an open storage reader (storage.StorageFile or wholefiles.LoadedFile).
    """
    shape = m.output.layout.shape
    return {t.name: files[t.name].gather(t.layout, shape, start, stop) for t in m.inputs if not t.null}


def _always(item) -> bool:
    return True


@dataclass(frozen=True)
class Stage:
    """What one command plugs into the pipeline. The functions are module-level (workers get them by name).

    batch(items, *args) -> one result per item, in order: small cases, run in one worker.
    split(run, item, *args) -> result: one large case, its ranges spread over `run`'s workers.
    broken(case_dir, error, *args) -> result: a case whose manifest does not load.
    """

    size: Callable[[Any], int]
    batch: Callable[..., list]
    split: Callable[..., Any]
    args: tuple = ()
    splittable: Callable[[Any], bool] = _always
    broken: Callable[..., Any] | None = None


def run_stage(stage: Stage, items: list, jobs: int, on_result: Callable[[Any, Any], None]) -> None:
    """Run a stage over items; on_result(item, result) for each, as results arrive."""
    sizes = [stage.size(i) for i in items]
    jobs = jobs_for(jobs, units(sizes))
    split = [jobs > 1 and is_large(n) and stage.splittable(i) for i, n in zip(items, sizes)]
    whole = [i for i, s in zip(items, split) if not s]
    if jobs > 1:
        def here(group: list) -> None:
            for item, result in zip(group, stage.batch(group, *stage.args)):
                on_result(item, result)

        # (only small cases run here: a large one that is not split, a Rows op's, is a worker's from the start; done
        #  here, two 4096 x 4096 x 4096 matmul cases ran one after the other in this process)
        unsplit = [(i, not is_large(n) and is_ours(i.op)) for i, n, s in zip(items, sizes, split) if not s]
        whole = (inline_first([i for i, small in unsplit if small], here, jobs=jobs)
                 + [i for i, small in unsplit if not small])
        if not whole and not any(split):
            return
    with Runner(jobs, forked=True) as run:
        futures = {run.submit(stage.batch, b, *stage.args): b for b in batches(whole, stage.size, run.jobs)}
        for item, s in zip(items, split):
            if s:
                try:
                    on_result(item, stage.split(run, item, *stage.args))
                except run.lost as exc:
                    raise worker_died(f"case {_name(item)}", exc) from None
        for f in as_completed(list(futures)):
            try:
                results = f.result()
            except run.lost as exc:
                names = [_name(i) for i in futures[f]]
                raise worker_died(f"case {names[0]}" + (f" or one of {len(names) - 1} others" if len(names) > 1
                                                         else ""), exc) from None
            for item, result in zip(futures[f], results):
                on_result(item, result)


def _name(item) -> str:
    """What a user calls a unit of work: its case id."""
    return str(getattr(item, "case_id", item))


def run_stage_on_dirs(stage: Stage, case_dirs: list[Path], jobs: int,
                      on_result: Callable[[str, int, Any], None]) -> None:
    """Run a stage over case directories; on_result(case id, output elements, result) for each.

    With workers, each loads its own batch of manifests (no serial read of thousands of them); a
    case too large for one worker comes back unrun and is split across the pool here.
    """
    def done(m: M.CaseManifest, result) -> None:
        on_result(m.case_id, stage.size(m), result)

    if jobs <= 1 or len(case_dirs) <= 1:
        outcomes, large, _ = _load_and_run(case_dirs, stage)
        for outcome in outcomes:
            on_result(*outcome)
        run_stage(stage, large, jobs, done)
        return
    deferred: list[M.CaseManifest] = []
    theirs: list[Path] = []  # (a user op's cases, met here: for the workers)

    def collect(outcomes: list, large: list[M.CaseManifest], users: list[Path] = ()) -> None:
        deferred.extend(large)
        theirs.extend(users)
        for outcome in outcomes:
            on_result(*outcome)

    rest = inline_first(case_dirs, lambda group: collect(*_load_and_run(group, stage, ours_only=True)), jobs=jobs)
    parts = batches(theirs + rest, lambda d: 1, jobs)
    if parts and forkpool.available() and stage.broken is not None:
        def lost(i: int, why: str) -> None:
            problem = (f"the worker process running this case and {len(parts[i]) - 1} others died ({why}); "
                       f"run it alone to see whether it is the one")
            for d in parts[i]:
                on_result(d.name, 0, stage.broken(d, UserError(problem, where=str(d)), *stage.args))

        forkpool.run_forked(lambda b: _load_and_run(b, stage), parts, jobs, lambda i, r: collect(*r), lost)
    elif parts:  # (no os.fork here)
        with Runner(jobs) as run:
            for f in as_completed([run.submit(_load_and_run, b, stage) for b in parts]):
                collect(*f.result())
    if deferred:  # (split across the workers, or whole in one where the stage says a case is not to be split)
        run_stage(stage, deferred, jobs, done)


LOCAL = 32  # directories loaded and run together: their objects stay in the CPU's caches between the two


@paused_gc()
def _load_and_run(case_dirs: list[Path], stage: Stage, ours_only: bool = False) \
        -> tuple[list[tuple[str, int, Any]], list[M.CaseManifest], list[Path]]:
    """A worker's batch of directories: (case id, elements, result) per case, the large cases unrun, and (with
    ours_only: in the command's own process) the directories of user ops' cases, unrun.

    Loaded and run LOCAL directories at a time: a case's manifest is read back while it is still in cache
    (thousands of small cases: a tenth of their time, measured)."""
    outcomes, large, users = [], [], []
    for at in range(0, len(case_dirs), LOCAL):
        manifests, broken = M.load_all(case_dirs[at:at + LOCAL])
        outcomes += [(d.name, 0, stage.broken(d, exc, *stage.args)) for d, exc in broken]
        if ours_only:
            users += [m.dir for m in manifests if not is_ours(m.op)]
            manifests = [m for m in manifests if is_ours(m.op)]
        sizes = [stage.size(m) for m in manifests]
        small = [(m, n) for m, n in zip(manifests, sizes) if not is_large(n)]
        outcomes += [(m.case_id, n, r) for (m, n), r in zip(small, stage.batch([m for m, _ in small], *stage.args))]
        large += [m for m, n in zip(manifests, sizes) if is_large(n)]
    return outcomes, large, users


def as_user_error(problem: Exception, where: Path | str) -> UserError:
    """An error met while handling a case, as the one line a user reads."""
    if isinstance(problem, UserError):
        return problem
    return UserError(getattr(problem, "strerror", None) or str(problem),
                     where=str(getattr(problem, "filename", None) or where))


# ------------------------------------------------------------------ the Rows family (ops/families/)

def shapes_of(m) -> dict[str, tuple[int, ...]]:
    """{tensor name: view shape} of a Case or CaseManifest (null tensors keep the shape they would have)."""
    return {t.name: tuple(t.layout.shape) for t in m.tensors}


def geometry(m):
    """The (A1, R, A0) rows of a Case or CaseManifest of a Rows op, else None (elementwise)."""
    family = m.op.family
    if family.element_local:
        return None
    try:  # (a manifest keeps its own, made once; a Case, read by gen once per stage, is cut here)
        return m.geometry if isinstance(m, M.CaseManifest) else family.geometry(shapes_of(m), m.attribute_values)
    except (KeyError, ValueError, TypeError, IndexError) as exc:
        raise UserError(f"{m.op.name}: cannot cut this case into rows: {exc}") from None


def own_geometry(m, name: str, geo):
    """The blocks of tensor `name` where the family cuts them from its own shape (a half-size yGrad), else None."""
    family = m.op.family
    return family.own_geometry(name, shapes_of(m), m.attribute_values, geo) if name in family.own else None


def block_at(m, name: str, geo, flat: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """(block, position inside it, elements per block) of tensor `name`'s logical elements `flat`: a per-row
    output's element b is block b; a tensor with its own geometry is cut by it; the rest by the driver's."""
    if name in m.op.family.per_row:
        return flat, np.zeros_like(flat), 1
    own = own_geometry(m, name, geo)
    return (*(own or geo).block_of(flat), (own or geo).block)


def case_elements(m) -> int:
    """What a case's work is counted in: the driver's elements for a Rows op, else the output's."""
    geo = geometry(m) if m.expect_status == 0 else None  # (a refused case may not cut into rows: dim out of range)
    return geo.numel if geo is not None else m.output.layout.numel


def write_blocks(m, out, f, geo, b0: int, b1: int, values: np.ndarray, write=None) -> None:
    """Write blocks [b0, b1) of output `out` (values in block order, as the op's functions return them): a
    per-row output's one value per block, a row output's elements wherever the family's blocks lie. write: a
    variant's own writer (device/defects.py), else the storage's."""
    values = values.reshape(-1)
    geo = own_geometry(m, out.name, geo) or geo
    if out.name in m.op.family.per_row:
        start, stop = b0, b1
    elif geo.contiguous:
        start, stop = b0 * geo.block, b1 * geo.block
    elif write is None:
        f.write_at(out.layout, geo.positions(b0, b1), values)
        return
    else:  # (the variant writes ranges: the blocks' elements in flat order, a run of consecutive ones at a time)
        where = geo.positions(b0, b1)
        if not where.size:  # (blocks of no element: an empty instance's positions)
            return
        order = np.argsort(where, kind="stable")
        where, values = where[order], values[order]
        cuts = np.flatnonzero(np.diff(where) != 1) + 1
        for run, vals in zip(np.split(where, cuts), np.split(values, cuts)):
            write(f.map, out.layout, int(run[0]), int(run[-1]) + 1, vals)
        return
    if write is None:
        f.write(out.layout, start, stop, values)
    else:
        write(f.map, out.layout, start, stop, values)


def block_chunks(geo, start_block: int, stop_block: int, chunk: int):
    """[b0, b1) block ranges of about `chunk` elements (at least one whole block each)."""
    step = max(1, chunk // max(geo.block, 1))
    for b in range(start_block, stop_block, step):
        yield b, min(stop_block, b + step)


def gather_blocks(m, files: dict, geo, b0: int, b1: int, wide: bool = True,
                  views: bool = False) -> dict[str, np.ndarray]:
    """The inputs of blocks [b0, b1) as the op's functions take them (docs/families.md): (k, R, A0) arrays,
    broadcast to the driver's shape; per-row inputs (k, 1, 1); a tensor with its own geometry (k, its R, its
    A0); null inputs absent. Float inputs as stored
    (widen them yourself), integer inputs as int64. views: a tensor with its own geometry may come as a read-only
    view over its storage (StorageFile.view), for a reader that takes a few of its values."""
    family = m.op.family
    shape = tuple(next(t for t in m.tensors if t.name == family.driver).layout.shape)
    k = b1 - b0
    out: dict[str, np.ndarray] = {}
    for t in m.inputs:
        if t.null:
            continue
        f = files[t.name]
        own = own_geometry(m, t.name, geo) if family.own else None
        if t.name in family.per_row:
            values = (np.repeat(f.read(t.layout, 0, 1), k) if t.layout.numel == 1 else f.read(t.layout, b0, b1)).reshape(k, 1, 1)
        elif t.name in family.whole:  # (read whole for every block: a count tensor of any shape)
            values = np.broadcast_to(f.read(t.layout, 0, t.layout.numel).reshape(1, 1, -1), (k, 1, t.layout.numel))
        elif own is not None:  # (its own shape's blocks: read where they lie, nothing broadcast)
            where = own.positions(b0, b1)
            read = f.view if views and isinstance(f, StorageFile) else f.read
            values = (read(t.layout, where.start, where.stop) if isinstance(where, slice) else
                      f.gather_at(t.layout, tuple(t.layout.shape), where)).reshape(k, own.r, own.a0)
        elif geo.contiguous:
            values = f.gather(t.layout, shape, b0 * geo.block, b1 * geo.block).reshape(k, geo.r, geo.a0)
        else:
            values = f.gather_at(t.layout, shape, geo.positions(b0, b1)).reshape(k, geo.r, geo.a0)
        if np.issubdtype(values.dtype, np.integer):
            values = values.astype(np.int64)
        out[t.name] = values
    out.update(family.row_values(m, files, out))  # (per-row values from the whole case: Scatter's index counts)
    out.update(family.block_values(m, b0, b1))  # (per-block values from the blocks' indices: a contraction's batches)
    return out

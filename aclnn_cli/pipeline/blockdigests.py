"""Per-block digests of a large golden: each range of a split verify checks the golden bytes it reads.

A large case's output is compared in ranges by several workers. Its golden's whole-file sha256 can only
be checked by reading the file once more from the start, after the workers have read it all (a quarter
of a first verify of a 64M-element float32 case). So gen also records the sha256 of each block of
`pipeline.RANGE` storage elements of such a golden (`golden_blocks` in the output's manifest entry,
covered by the manifest's digest), and every range, whose bounds are multiples of RANGE, hashes the
golden bytes its comparison reads, block by block, and checks them. Every byte of the golden is then
read once and proven unchanged: on a warm page cache that saves little, on a golden read from disk a
second read of the whole file. Recorded for contiguous outputs verify splits (over SPLIT elements),
up to MAX_BLOCKS blocks; without them (older manifests, other layouts) verify hashes the whole file.
"""

from __future__ import annotations

import hashlib
import re

import numpy as np

from ..errors import UserError
from . import stages as pipeline
from ..tensor.storage import changed

MAX_BLOCKS = 4096  # 4G elements: the list stays far below the manifest's size limit
KEY = "golden_blocks"
_HEX = re.compile(r"[0-9a-f]{64}")


def wanted(layout, numel: int) -> bool:
    """Whether gen records block digests for an output of this layout (contiguous: storage = view): one
    that verify splits into ranges (pipeline.is_large)."""
    return layout.is_contiguous and pipeline.is_large(numel) and numel <= pipeline.RANGE * MAX_BLOCKS


def file_digests(path, block_bytes: int) -> tuple[str, list[str]]:
    """(the file's sha256, the sha256 of each block_bytes block of it), in one read."""
    whole, blocks = hashlib.sha256(), []
    with open(path, "rb") as f:
        while block := f.read(block_bytes):
            whole.update(block)
            blocks.append(hashlib.sha256(block).hexdigest())
    return whole.hexdigest(), blocks


def entry(blocks: list[str]) -> dict:
    """The manifest's record of a golden's block digests."""
    return {"elements": pipeline.RANGE, "sha256": blocks}


def recorded(m, out) -> list[str] | None:
    """The golden's block digests from case.json, if gen recorded them for blocks of this tool's RANGE
    (else None: the whole file is hashed). A malformed record is a malformed manifest."""
    raw = next(t for t in m.raw["tensors"] if t.get("name") == out.name).get(KEY)
    if raw is None:
        return None
    size = raw.get("elements") if type(raw) is dict else None
    digests = raw.get("sha256") if type(raw) is dict else None
    ok = (type(size) is int and size > 0 and type(digests) is list
          and len(digests) == -(-out.layout.storage_size // size)
          and all(type(h) is str and _HEX.fullmatch(h) for h in digests))
    if not ok:
        raise UserError(f"malformed manifest: tensor {out.name}'s '{KEY}' is not the sha256 of each block of "
                        f"its golden", where=str(m.dir / "case.json"))
    return digests if size == pipeline.RANGE and out.layout.is_contiguous else None


class BlockCheck:
    """Hashes the golden chunks a range's comparison reads, in order, and checks each block as it ends."""

    def __init__(self, digests: list[str], start: int, stop: int, size: int, path, what: str = "golden") -> None:
        self.block = pipeline.RANGE
        if start % self.block:
            raise ValueError(f"a range starting at {start} is not on a block boundary")
        self.digests, self.stop, self.size, self.path, self.what = digests, stop, size, path, what
        self.at, self.hash = start, hashlib.sha256()

    def update(self, start: int, values: np.ndarray) -> None:
        """The golden's elements [start, start + len(values)), read by the comparison in order (a chunk may
        cross a block's end)."""
        if start != self.at:
            raise ValueError(f"golden read at {start}, expected {self.at}")
        data, item, end = memoryview(values.view(np.uint8)), values.itemsize, start + values.size
        while self.at < end:
            upto = min(end, (self.at // self.block + 1) * self.block)
            self.hash.update(data[(self.at - start) * item:(upto - start) * item])
            self.at = upto
            if upto % self.block == 0 or upto == self.size:
                if self.hash.hexdigest() != self.digests[(upto - 1) // self.block]:
                    raise changed(self.what, self.path)
                self.hash = hashlib.sha256()

    def finish(self) -> None:
        """Every block the range covers was read and checked (a range ends on a block's end or the file's)."""
        if self.at != self.stop or not (self.stop % self.block == 0 or self.stop == self.size):
            raise ValueError(f"golden blocks read to {self.at} of a range ending at {self.stop}")

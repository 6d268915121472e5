"""Registers tests/kinds_standins.py's stand-ins of the six reduction ops (those not bundled yet):
`aclnn-cli --ops tests/user_ops/_kinds_standins.py ...` (a _ name: loading tests/user_ops as a folder skips it)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from aclnn_cli.ops import OPS, register  # noqa: E402
from kinds_standins import STANDINS  # noqa: E402

for spec in STANDINS:
    if spec.name not in OPS:
        register(spec)

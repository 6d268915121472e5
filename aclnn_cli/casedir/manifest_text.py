"""case.json's text: written as gen writes it (one key per line, one tensor per line, by json's C encoder),
sealed with the sha256 of its bytes, and the canonical JSON the manifest's digest and the case fingerprint hash."""

from __future__ import annotations

import hashlib
import json


def canonical_json(data, allow_nan: bool = False) -> str:
    """json.dumps(data, sort_keys=True, allow_nan=allow_nan), through an encoder made once (json.dumps
    makes one per call). No cycle check: nothing hashed here has cycles."""
    encoder = _C_ENCODERS.get(allow_nan)
    if encoder is None:
        return json.dumps(data, sort_keys=True, allow_nan=allow_nan)
    return "".join(encoder(data, 0))


def _not_json(o):
    raise TypeError(f"Object of type {o.__class__.__name__} is not JSON serializable")


_C_ENCODERS = {} if json.encoder.c_make_encoder is None else {
    nan: json.encoder.c_make_encoder(None, _not_json, json.encoder.encode_basestring_ascii, None, ": ", ", ", True,
                                     False, nan) for nan in (False, True)}


# gen's manifest ends with this key: the sha256 of every byte before its line (sealed_text). A text whose seal
# holds is gen's own, byte for byte, so what gen computed of it holds too: its digest, no duplicate key, strict
# JSON. verify then need not re-encode the covered keys to check the digest (a third of reading a manifest);
# any edit breaks the seal, and the manifest is checked as before (its digest, under jsonsafe's limits).
SEAL = b'  "text_sha256": "'
_SEAL_END = b'"\n}\n'
_SEALED_SIZE = len(SEAL) + 64 + len(_SEAL_END)


def sealed_text(data: dict) -> bytes:
    """The manifest as gen writes it: dumps_json's text with a last key, the sha256 of every byte before it."""
    head = dumps_json(data).encode()[:-3] + b",\n"  # (dumps_json's text ends with "\n}\n")
    return head + SEAL + hashlib.sha256(head).hexdigest().encode() + _SEAL_END


def sealed_json(data: bytes) -> dict | None:
    """The manifest's data if its seal holds (sealed_text), else None (then it is read as any JSON from outside)."""
    at = len(data) - _SEALED_SIZE
    if at <= 0 or data[at:at + len(SEAL)] != SEAL or not data.endswith(_SEAL_END):
        return None
    if hashlib.sha256(memoryview(data)[:at]).hexdigest().encode() != data[at + len(SEAL):at + len(SEAL) + 64]:
        return None
    try:
        text = data.decode("utf-8")
        raw, end = _SCAN(text, 0)  # (json.loads's own scanner, less its three Python layers: thousands of cases)
    except (ValueError, RecursionError, StopIteration):  # (not gen's after all: read the usual way, which says why)
        return None
    return raw if type(raw) is dict and not text[end:].strip() else None


_SCAN = json.JSONDecoder().scan_once  # (as json.loads decodes: the default decoder's scanner)


def dumps_json(data: dict) -> str:
    """A manifest as strict JSON, one key per line and one tensor per line: readable, and written by
    json's C encoder (an indented dump goes through its pure-Python path, 10x slower per case)."""
    encode = _LINE_ENCODER or (lambda o, _: [json.dumps(o, allow_nan=False)])
    lines = []
    for key, value in data.items():
        if key == "tensors" and isinstance(value, list) and value:
            inner = ",\n".join(f"    {''.join(encode(t, 0))}" for t in value)
            lines.append(f'  "tensors": [\n{inner}\n  ]')
        else:
            lines.append(f"  {json.dumps(key)}: {''.join(encode(value, 0))}")
    return "{\n" + ",\n".join(lines) + "\n}\n"


# json.dumps(o, allow_nan=False) as one encoder made once (json.dumps makes one per call)
_LINE_ENCODER = None if json.encoder.c_make_encoder is None else json.encoder.c_make_encoder(
    None, _not_json, json.encoder.encode_basestring_ascii, None, ": ", ", ", False, False, False)


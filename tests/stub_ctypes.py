"""The stub CANN toolkit driven from Python through ctypes: tensors from NumPy arrays, the two phases, results back.

Used by tests of the stub's kernels against independent oracles (test_stub_reductions.py). The stub
computes on host memory, but everything goes through the public API as a harness would: aclrtMalloc,
aclrtMemcpy, aclCreateTensor / IntArray / BoolArray, phase one, workspace, phase two, synchronize.
"""

from __future__ import annotations

import ctypes as C
from dataclasses import dataclass, field
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from shared import shared_stub_root

ACL_IDS = {np.dtype("float32"): 0, np.dtype("float16"): 1, np.dtype(ml_dtypes.bfloat16): 27, np.dtype("float64"): 11,
           np.dtype("int32"): 3, np.dtype("int64"): 9, np.dtype("uint8"): 4, np.dtype("int8"): 2}
P = C.c_void_p


@dataclass
class Tensor:
    handle: int
    device: int
    array: np.ndarray  # the storage as uploaded (its dtype, its 1-D size)
    shape: tuple
    strides: tuple
    offset: int


@dataclass
class Stub:
    """One process's view of the stub: aclInit and one device, once (the stub refuses a second aclInit)."""

    root: Path
    live: list = field(default_factory=list)

    def __post_init__(self) -> None:
        lib = self.root / "lib64"
        mode = C.RTLD_GLOBAL
        self.acl = C.CDLL(str(lib / "libascendcl.so"), mode=mode)
        self.meta = C.CDLL(str(lib / "libnnopbase.so"), mode=mode)
        self.ops = C.CDLL(str(lib / "libopapi.so"), mode=mode)
        self.acl.aclGetRecentErrMsg.restype = C.c_char_p
        self.meta.aclCreateTensor.restype = P
        self.meta.aclCreateTensor.argtypes = [P, C.c_uint64, C.c_int, P, C.c_int64, C.c_int, P, C.c_uint64, P]
        self.meta.aclCreateIntArray.restype = P
        self.meta.aclCreateIntArray.argtypes = [P, C.c_uint64]
        self.meta.aclCreateBoolArray.restype = P
        self.meta.aclCreateBoolArray.argtypes = [P, C.c_uint64]
        for f in ("aclDestroyTensor", "aclDestroyIntArray", "aclDestroyBoolArray"):
            getattr(self.meta, f).argtypes = [P]
        self.acl.aclrtMalloc.argtypes = [C.POINTER(P), C.c_size_t, C.c_int]
        self.acl.aclrtMemcpy.argtypes = [P, C.c_size_t, P, C.c_size_t, C.c_int]
        self.acl.aclrtFree.argtypes = [P]
        self.acl.aclrtSynchronizeStream.argtypes = [P]
        init = self.acl.aclInit(None)
        assert init in (0, 100002), init  # 100002: already initialised in this process
        assert self.acl.aclrtSetDevice(0) == 0
        self.stream = P()
        assert self.acl.aclrtCreateStream(C.byref(self.stream)) == 0

    def error(self) -> str:
        msg = self.acl.aclGetRecentErrMsg()
        return msg.decode() if msg else ""

    def tensor(self, array: np.ndarray, shape=None, strides=None, offset: int = 0) -> Tensor:
        """A device tensor holding `array`'s bytes as its storage, viewed as shape/strides/offset (default: packed)."""
        storage = np.ascontiguousarray(array).reshape(-1)
        shape = tuple(np.shape(array)) if shape is None else tuple(shape)
        if strides is None:
            strides = tuple(int(np.prod(shape[i + 1:], dtype=np.int64)) for i in range(len(shape)))
        dev = P()
        nbytes = storage.nbytes
        if nbytes:
            assert self.acl.aclrtMalloc(C.byref(dev), nbytes, 0) == 0
            assert self.acl.aclrtMemcpy(dev, nbytes, storage.ctypes.data, nbytes, 1) == 0  # host to device
        dims = (C.c_int64 * max(1, len(shape)))(*shape)
        st = (C.c_int64 * max(1, len(strides)))(*strides)
        sdims = (C.c_int64 * 1)(storage.size)
        handle = self.meta.aclCreateTensor(dims, len(shape), ACL_IDS[storage.dtype], st, offset, 2, sdims, 1, dev)
        assert handle, self.error()
        t = Tensor(handle, dev.value or 0, storage, shape, strides, offset)
        self.live.append(t)
        return t

    def storage(self, t: Tensor) -> np.ndarray:
        """The whole storage of t, copied back from the device."""
        out = np.empty_like(t.array)
        if out.nbytes:
            assert self.acl.aclrtMemcpy(out.ctypes.data, out.nbytes, t.device, out.nbytes, 2) == 0  # device to host
        return out

    def view(self, t: Tensor) -> np.ndarray:
        """t's view of its storage (after a call), as an array of its shape."""
        data = self.storage(t)
        item = data.dtype.itemsize
        return np.lib.stride_tricks.as_strided(data[t.offset:], t.shape, tuple(s * item for s in t.strides)).copy()

    def int_array(self, values) -> int:
        arr = (C.c_int64 * max(1, len(values)))(*values)
        return self.meta.aclCreateIntArray(arr, len(values))

    def bool_array(self, values) -> int:
        arr = (C.c_bool * max(1, len(values)))(*values)
        return self.meta.aclCreateBoolArray(arr, len(values))

    def call(self, api: str, *args) -> int:
        """Phase one with `args` (Tensor, None for nullptr, int for int64_t, bool for bool, float for double, or a
        raw handle), then phase two if it succeeded. Returns phase one's status; phase two must succeed."""
        conv = []
        for a in args:
            if isinstance(a, Tensor):
                conv.append(P(a.handle))
            elif a is None:
                conv.append(P())
            elif isinstance(a, Handle):
                conv.append(P(a.value))
            elif isinstance(a, bool):
                conv.append(C.c_bool(a))
            elif isinstance(a, float):
                conv.append(C.c_double(a))
            else:
                conv.append(C.c_int64(a))
        size, executor = C.c_uint64(), P()
        status = getattr(self.ops, f"{api}GetWorkspaceSize")(*conv, C.byref(size), C.byref(executor))
        if status != 0:
            return status
        ws = P()
        if size.value:
            assert self.acl.aclrtMalloc(C.byref(ws), size.value, 0) == 0
        phase_two = getattr(self.ops, api)
        phase_two.argtypes = [P, C.c_uint64, P, P]
        ret = phase_two(ws, size.value, executor, self.stream)
        assert ret == 0, (ret, self.error())
        assert self.acl.aclrtSynchronizeStream(self.stream) == 0
        if ws.value:
            self.acl.aclrtFree(ws)
        return 0

    def release(self) -> None:
        for t in self.live:
            self.meta.aclDestroyTensor(P(t.handle))
            if t.device:
                self.acl.aclrtFree(P(t.device))
        self.live.clear()


_SHARED: dict[str, Stub] = {}


def shared_stub(build) -> Stub:
    """The one Stub of this test process (the stub's libraries load once: a second copy would be another
    runtime); `build()` returns the toolkit root the first time."""
    if "stub" not in _SHARED:
        _SHARED["stub"] = Stub(build())
    return _SHARED["stub"]


class Handle:
    """An aclIntArray* / aclBoolArray* argument (not an int64_t)."""

    def __init__(self, value: int) -> None:
        self.value = value


@pytest.fixture
def stub(tmp_path_factory, monkeypatch) -> Stub:
    """The process's stub (import this fixture), on the default product (A2); a test's tensors are freed after it."""
    monkeypatch.delenv("ACLNN_STUB_SOC", raising=False)
    s = shared_stub(lambda: shared_stub_root(tmp_path_factory))
    yield s
    s.release()

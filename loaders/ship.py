"""How a batch leaves a DataLoader worker: through a shared-memory segment the worker reuses,
instead of a new segment and a passed file descriptor per tensor plus pickled strings.

`ship(table)` turns an Arrow batch, in a worker, into a `Shipment`: a dict (tensors
and lazily read string columns, for any code in the worker that looks at it) whose
bytes already sit in one of the worker's segments (named files in /dev/shm, made and
touched once, then reused). torch's DataLoader pickles it as (segment name, layout);
the training process unpickles it by mapping the segment, copying the batch out and
setting the segment's free flag, and gets a plain dict equal to what
`convert.table_to_batch` gives: tensors, lists of 1-D tensors for ragged lists, lists
of str / bytes for string and binary columns (decoded there, as unpickling str
would), Python lists for everything else.

Segments are a worker's own: it unlinks them when it exits, also when terminated
(torch terminates a worker that does not exit within 5 s of the loader's shutdown,
which a loaded machine can cause); those of a killed worker are unlinked by the next
worker that starts shipping.
"""
from __future__ import annotations

import mmap
import os
import secrets
import signal
import threading
from collections.abc import Sequence
from multiprocessing.util import Finalize

import numpy as np
import pyarrow as pa
import torch

from .arrays import numpy_of
from .convert import _as_array, _list_of_numbers, _numeric

SHM_DIR = "/dev/shm"
_ALIGN = 64
_HEADER = 64          # the free flag, then the batch
_GRAIN = 256 << 10    # segment sizes are rounded up to this


class Texts(Sequence):
    """A string or binary column of a shipped batch, read from Arrow on access."""

    def __init__(self, arr: pa.Array):
        self._arr = arr

    def __len__(self) -> int:
        return len(self._arr)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return self._arr[i].to_pylist()
        return self._arr[i].as_py()

    def __iter__(self):
        return iter(self._arr.to_pylist())

    def __eq__(self, other) -> bool:
        return list(self) == list(other)

    def __repr__(self) -> str:
        return f"Texts({len(self)} values)"


def _plan(table: pa.Table):
    """Per column: (name, kind, arrays to copy into the buffer)."""
    out = []
    for name in table.column_names:
        arr = _as_array(table.column(name))
        t = arr.type
        if _numeric(t) and not pa.types.is_boolean(t) and arr.null_count == 0:
            out.append((name, "num", [numpy_of(arr)]))
        elif _list_of_numbers(t) and not pa.types.is_boolean(t.value_type) and arr.null_count == 0 \
                and arr.values.null_count == 0:
            if pa.types.is_fixed_size_list(t):
                flat = numpy_of(arr.flatten())
                lengths = np.full(len(arr), t.list_size, dtype=np.int64)
            else:
                offsets = numpy_of(arr.offsets)
                flat = numpy_of(arr.values.slice(offsets[0], offsets[-1] - offsets[0]))
                lengths = np.diff(offsets).astype(np.int64)
            out.append((name, "list", [flat, lengths]))
        elif (pa.types.is_string(t) or pa.types.is_binary(t)) and arr.null_count == 0:
            raw = np.frombuffer(arr.buffers()[1], dtype=np.int32)[arr.offset:arr.offset + len(arr) + 1]
            data = arr.buffers()[2]
            values = np.frombuffer(data, dtype=np.uint8)[raw[0]:raw[-1]] if data is not None and len(arr) \
                else np.zeros(0, dtype=np.uint8)
            out.append((name, "str" if pa.types.is_string(t) else "bin", [values, raw - raw[0]], arr))
        else:
            out.append((name, "obj", arr.to_pylist()))
    return out


class _Segment:
    """A named shared-memory file in /dev/shm, mapped and touched once (so reusing it costs
    no page faults). Byte 0-7: a flag the training process sets to 1 once it has copied a
    batch out, which hands the segment back to the worker."""

    def __init__(self, capacity: int):
        self.name = f"shardforge-{os.getpid()}-{secrets.token_hex(6)}"
        self.capacity = capacity
        fd = os.open(os.path.join(SHM_DIR, self.name), os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
        try:
            os.ftruncate(fd, capacity)
            self.map = mmap.mmap(fd, capacity)
        finally:
            os.close(fd)
        self.view = np.frombuffer(self.map, dtype=np.uint8)
        self.view[:] = 0
        self.flag = self.view[:8].view(np.uint64)
        self.flag[0] = 1

    def close(self) -> None:
        self.view = self.flag = None
        try:
            self.map.close()
        except BufferError:      # a worker-side batch still looks at it; the OS frees it at exit
            pass
        try:
            os.unlink(os.path.join(SHM_DIR, self.name))
        except FileNotFoundError:
            pass


class _Ring:
    """One worker process's segments, reused as the training process frees them."""

    def __init__(self):
        self.pid = os.getpid()
        self.segments: list[_Segment] = []
        Finalize(self, _Ring.close, args=(self.segments,), exitpriority=10)  # runs at worker exit
        _unlink_on_sigterm()
        _sweep()

    def acquire(self, size: int) -> _Segment:
        for seg in self.segments:
            if seg.flag[0] == 1 and seg.capacity >= size:
                seg.flag[0] = 0
                return seg
        small = [seg for seg in self.segments if seg.flag[0] == 1]
        if small:                      # free but too small: replace it
            self.segments.remove(small[0])
            small[0].close()
        seg = _Segment(-(-int(size * 1.25) // _GRAIN) * _GRAIN)
        seg.flag[0] = 0
        self.segments.append(seg)
        return seg

    @staticmethod
    def close(segments: list) -> None:
        for seg in segments:
            seg.close()
        segments.clear()


def _sweep() -> None:
    """Unlink the segments of processes that are gone (a worker that torch terminated at
    shutdown, or that was killed, cannot unlink its own)."""
    for name in os.listdir(SHM_DIR):
        parts = name.split("-")
        if len(parts) != 3 or parts[0] != "shardforge" or not parts[1].isdigit():
            continue
        if not _alive(int(parts[1])):
            try:
                os.unlink(os.path.join(SHM_DIR, name))
            except FileNotFoundError:
                pass


def _alive(pid: int) -> bool:
    """Whether process `pid` exists (the owner of the segments named after it)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:      # alive, another user's
        pass
    return True


def _on_sigterm(signum, frame):
    if _RING is not None and _RING.pid == os.getpid():
        _Ring.close(_RING.segments)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


def _unlink_on_sigterm() -> None:
    """SIGTERM (torch's `terminate()` of a slow worker) unlinks this process's segments, then
    ends the process as SIGTERM would have. Left alone when the process (a worker_init_fn)
    already handles SIGTERM."""
    if threading.current_thread() is threading.main_thread() \
            and signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, _on_sigterm):
        signal.signal(signal.SIGTERM, _on_sigterm)


_RING: _Ring | None = None


def _ring() -> _Ring:
    global _RING
    if _RING is None or _RING.pid != os.getpid():    # a forked worker gets its own
        _RING = _Ring()
    return _RING


def available() -> bool:
    """Whether batches can be shipped this way here (a Linux /dev/shm)."""
    return os.path.isdir(SHM_DIR) and os.access(SHM_DIR, os.W_OK)


class Shipment:
    """A batch made in a DataLoader worker, read-only, that pickles as a reference to the
    shared-memory segment holding it; pickle it once (the receiver frees the segment).

    It reads like a dict (`[]`, `keys`, `items`, `len`, `in`) but is not a Mapping on
    purpose: torch's `default_convert` passes unknown objects through unchanged, and
    rebuilds Mappings (which would read every string in the worker). `copy.copy`
    and `copy.deepcopy` give a plain dict that owns its data.
    """

    def __init__(self, values: dict, ref: tuple):
        self._values, self._ref = values, ref

    def __getitem__(self, key):
        return self._values[key]

    def __iter__(self):
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __contains__(self, key) -> bool:
        return key in self._values

    def keys(self):
        return self._values.keys()

    def values(self):
        return self._values.values()

    def items(self):
        return self._values.items()

    def get(self, key, default=None):
        return self._values.get(key, default)

    def __copy__(self) -> dict:
        return {k: v.clone() if isinstance(v, torch.Tensor) else
                [t.clone() for t in v] if isinstance(v, list) and v and isinstance(v[0], torch.Tensor)
                else list(v) for k, v in self._values.items()}

    def __deepcopy__(self, memo) -> dict:
        return self.__copy__()

    def __reduce__(self):
        return _receive, self._ref

    def __repr__(self) -> str:
        return f"Shipment({list(self._values)})"


def ship(table: pa.Table) -> Shipment:
    """The batch `table` as a Shipment (see the module docstring)."""
    plan = _plan(table)
    spans, size = [], _HEADER
    for entry in plan:
        if entry[1] == "obj":
            continue
        for a in entry[2]:
            size = -(-size // _ALIGN) * _ALIGN
            spans.append((size, a))
            size += a.nbytes
    seg = _ring().acquire(size)
    for at, a in spans:
        seg.view[at:at + a.nbytes] = a.view(np.uint8).reshape(-1)
    values, layout, it = {}, [], iter(spans)
    for entry in plan:
        name, kind = entry[0], entry[1]
        if kind == "obj":
            values[name] = entry[2]
            layout.append((name, kind, entry[2]))
            continue
        parts = [(at, a.dtype.str, a.shape) for at, a in (next(it) for _ in entry[2])]
        layout.append((name, kind, parts))
        values[name] = Texts(entry[3]) if kind in ("str", "bin") else _column(seg.view, kind, parts, copy=False)
    return Shipment(values, (seg.name, size, layout))


def _array(view: np.ndarray, at: int, dtype: str, shape) -> np.ndarray:
    dt = np.dtype(dtype)
    n = int(np.prod(shape)) if len(shape) else 1
    return view[at:at + n * dt.itemsize].view(dt).reshape(shape)


def _column(view: np.ndarray, kind: str, parts, *, copy: bool = True):
    if kind == "num":
        a = _array(view, *parts[0])
        return torch.from_numpy(a.copy() if copy else a)
    if kind == "list":
        values, lengths = _array(view, *parts[0]), _array(view, *parts[1])
        values = torch.from_numpy(values.copy() if copy else values)
        if len(lengths) and (lengths == lengths[0]).all():
            return values.reshape(len(lengths), int(lengths[0]))
        return list(torch.split(values, lengths.tolist()))
    data, offsets = _array(view, *parts[0]), _array(view, *parts[1])
    t = pa.string() if kind == "str" else pa.binary()
    arr = pa.Array.from_buffers(t, len(offsets) - 1, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    return arr.to_pylist()


def _receive(name: str, size: int, layout) -> dict:
    """The training process's side: copy the batch out of the worker's segment into a plain
    dict, then hand the segment back."""
    return _from_segment(name, size, lambda view: {n: payload if kind == "obj" else _column(view, kind, payload)
                                                   for n, kind, payload in layout})


class _Mappings:
    """The training process's mappings of workers' segments, kept between batches: a
    worker reuses a few segments, so mapping each once saves an open, an mmap and a munmap
    per batch. A segment's mapping is dropped when its worker is gone (checked whenever an
    unseen segment arrives: a new worker, or a segment that replaced a smaller one) and, past
    `limit` mappings, the least recently used goes first."""

    def __init__(self, limit: int = 64):
        self.limit = limit
        self.maps: dict[str, tuple[mmap.mmap, np.ndarray]] = {}
        self.pid = os.getpid()

    def view(self, name: str, size: int) -> np.ndarray:
        hit = self.maps.pop(name, None)
        if hit is not None and len(hit[1]) >= size:
            self.maps[name] = hit                   # most recently used last
            return hit[1]
        if hit is not None:
            _unmap(hit)
        self._drop_dead()
        fd = os.open(os.path.join(SHM_DIR, name), os.O_RDWR)
        try:
            length = max(size, os.fstat(fd).st_size)
            mm = mmap.mmap(fd, length, flags=mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0))
        finally:
            os.close(fd)
        self.maps[name] = (mm, np.frombuffer(mm, dtype=np.uint8))
        while len(self.maps) > self.limit:
            _unmap(self.maps.pop(next(iter(self.maps))))
        return self.maps[name][1]

    def _drop_dead(self) -> None:
        alive: dict[int, bool] = {}
        for name in list(self.maps):
            pid = int(name.split("-")[1])
            if pid not in alive:
                alive[pid] = _alive(pid)
            if not alive[pid]:
                _unmap(self.maps.pop(name))


def _unmap(entry) -> None:
    mm, view = entry
    del view
    try:
        mm.close()
    except BufferError:      # a caller still holds a view of it; the OS unmaps it at exit
        pass


_MAPPINGS: _Mappings | None = None


def _from_segment(name: str, size: int, copy_out):
    """`copy_out(view)` on the bytes of a worker's segment, mapped for the receiver; then the
    segment is marked free for the worker to reuse. `copy_out` must copy what it keeps."""
    global _MAPPINGS
    if _MAPPINGS is None or _MAPPINGS.pid != os.getpid():
        _MAPPINGS = _Mappings()
    view = _MAPPINGS.view(name, size)
    out = copy_out(view)
    view[:8].view(np.uint64)[0] = 1
    return out


class ArrayShipment:
    """A numeric array made in a DataLoader worker (a batch of token sequences) that pickles
    as a reference to the worker's shared-memory segment holding it; the training process
    gets a torch tensor that owns a copy. Pickle it once (the receiver frees the segment)."""

    def __init__(self, array: np.ndarray, ref: tuple):
        self.array, self._ref = array, ref

    @property
    def shape(self):
        return self.array.shape

    def __reduce__(self):
        return _receive_array, self._ref

    def __repr__(self) -> str:
        return f"ArrayShipment({self.array.dtype}, {self.array.shape})"


def ship_array(array: np.ndarray) -> ArrayShipment:
    """`array` as an ArrayShipment (see ArrayShipment)."""
    array = np.ascontiguousarray(array)
    size = _HEADER + array.nbytes
    seg = _ring().acquire(size)
    seg.view[_HEADER:size] = array.view(np.uint8).reshape(-1)
    return ArrayShipment(_array(seg.view, _HEADER, array.dtype.str, array.shape),
                         (seg.name, size, array.dtype.str, array.shape))


def _receive_array(name: str, size: int, dtype: str, shape) -> torch.Tensor:
    return _from_segment(name, size, lambda view: torch.from_numpy(_array(view, _HEADER, dtype, shape).copy()))

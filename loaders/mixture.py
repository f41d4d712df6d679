"""Weighted mixtures of shard builds: one deterministic interleaving, one resumable state.

`Schedule(weights)` says which source each position of the mixture comes from. The rule
is the largest deficit: position i goes to the source whose count lags its weight x (i+1)
the most (ties to the first source). With rational weights (each reduced to a fraction,
denominators kept small) the schedule repeats with period D, the weights' common
denominator, so the source of position i and every source's count before it are O(1)
to compute: one period is laid out once. Over every prefix of n positions each source
is within one sample of weight x n, and for common weights (for example 0.5/0.3/0.2)
over every window of n positions too (a test checks it on 10,000 positions).

`MixtureReader` reads a mixture as one stream of positions 0..M-1 per epoch, M =
`samples_per_epoch` (default: the largest M for which no source is read past one of its
own epochs). Source s's k-th sample of the mixture is position k of its own endless
stream (its epochs one after another, in its own order: seed derived from the mixture's
seed and s). A mixture's position is therefore a pure function of (sources, weights,
seed, epoch), and the plan, ranks, lanes, workers and state of `assignment` and `state`
apply to it unchanged: exact resume, elastic resume across W -> W' and K -> K', and equal
steps per rank hold as for one build. Sources in row modes must share the columns read
(names and types); in sequence mode their token columns must have one integer type.
"""
from __future__ import annotations

import hashlib
from fractions import Fraction
from math import lcm

import numpy as np
import pyarrow as pa

from .arrays import array_of
from .order import stream_key
from .reader import WINDOW_BYTES, ShardReader
from .source import LoaderError
from .tokens import SequenceReader
from .windows import one_table

MAX_PERIOD = 100_000


class Schedule:
    """Which source each mixture position comes from (see the module docstring)."""

    def __init__(self, weights):
        w = [Fraction(x).limit_denominator(1000) if not isinstance(x, Fraction) else x for x in weights]
        if not w or any(x <= 0 for x in w):
            raise LoaderError(f"mixture weights must be positive numbers, got {list(weights)}")
        total = sum(w)
        w = [x / total for x in w]
        period = lcm(*[x.denominator for x in w])
        if period > MAX_PERIOD:   # keep one period small: round the weights to 1/MAX_PERIOD
            scaled = [int(x * MAX_PERIOD) for x in w]
            for i in sorted(range(len(w)), key=lambda i: -(w[i] * MAX_PERIOD - scaled[i]))[:MAX_PERIOD - sum(scaled)]:
                scaled[i] += 1
            w, period = [Fraction(n, MAX_PERIOD) for n in scaled], MAX_PERIOD
        self.weights = w
        self.period = period
        quota = np.array([int(x * period) for x in w], dtype=np.int64)   # samples per period
        seq = np.empty(period, dtype=np.int32)
        counts = np.zeros(len(w), dtype=np.int64)
        for i in range(period):             # deficit x period, in integers: quota*(i+1) - period*count
            s = int(np.argmax(quota * (i + 1) - period * counts))
            seq[i] = s
            counts[s] += 1
        self.sources = seq
        self.quota = quota
        self._before = np.zeros((period + 1, len(w)), dtype=np.int64)   # counts before each offset of a period
        np.cumsum(np.eye(len(w), dtype=np.int64)[seq], axis=0, out=self._before[1:])

    def counts(self, i: int) -> np.ndarray:
        """Samples of each source among positions [0, i)."""
        q, r = divmod(int(i), self.period)
        return q * self.quota + self._before[r]

    def source_of(self, start: int, stop: int) -> np.ndarray:
        """The source of each position in [start, stop)."""
        idx = np.arange(start, stop, dtype=np.int64) % self.period
        return self.sources[idx]


def _schema(reader: ShardReader):
    """The Arrow schema of a build's shards (None for an empty build)."""
    for shard in reader.source.manifest.shards:
        if shard.rows:
            return reader.source.file(shard.index).schema_arrow
    return None


class _MixtureSource:
    """What ShardReader needs of its source, for a mixture: a fingerprint, a length, columns."""

    def __init__(self, fingerprint: str, total: int, columns: list[str]):
        self.fingerprint, self.total, self.columns = fingerprint, total, columns
        self.blocks = np.zeros((0, 4), dtype=np.int64)


class _Stream:
    """One source's endless stream (its epochs in turn) for one lane of a mixture."""

    def __init__(self, reader: ShardReader, threads: bool):
        self.reader, self.threads = reader, threads
        self._epoch: int | None = None
        self._cursor = None

    def _enter(self, epoch: int):
        if self._epoch != epoch:
            if self._cursor is not None:
                self._cursor.close()
            self._cursor, self._epoch = self.reader.epoch_cursor(epoch, threads=self.threads), epoch
        return self._cursor

    def read(self, start: int, stop: int) -> list:
        out, k, n = [], start, self.reader.total
        while k < stop:
            epoch, pos = divmod(k, n)
            end = min(stop, (epoch + 1) * n)
            out.extend(self._enter(epoch).read(pos, pos + end - k))
            k = end
        return out

    def close(self) -> None:
        if self._cursor is not None:
            self._cursor.close()


class _MixtureCursor:
    def __init__(self, mixture: "MixtureReader", threads: bool):
        self.mixture = mixture
        self.streams = [_Stream(r, threads) for r in mixture.readers]

    def read(self, start: int, stop: int):
        m = self.mixture
        base = m.epoch * m.samples_per_epoch         # the mixture's positions of all earlier epochs
        a, b = m.schedule.counts(base + start), m.schedule.counts(base + stop)
        which = m.schedule.source_of(base + start, base + stop)
        parts, offset, index = [], 0, np.empty(stop - start, dtype=np.int64)
        for s, stream in enumerate(self.streams):
            n = int(b[s] - a[s])
            if n == 0:
                continue
            parts.append(m._join(stream.read(int(a[s]), int(b[s]))))
            index[which == s] = offset + np.arange(n)
            offset += n
        joined = m._join(parts)
        yield joined.take(array_of(index)) if isinstance(joined, pa.Table) else joined[index]

    def close(self) -> None:
        for s in self.streams:
            s.close()


class MixtureReader(ShardReader):
    """Rank `rank` of `world_size`'s part of a weighted mixture of builds.

    `sources`: [(path, weight), ...]. Row modes read `columns` of every source (default:
    the columns all sources have); with `sequence_length` every source is read as packed
    token sequences (`token_column`, `eos_id`). `samples_per_epoch`: the mixture epoch's
    length (default: the largest for which no source is read past one of its epochs;
    larger values repeat the smaller sources, epoch after epoch). Each source gets
    `window_bytes / len(sources)` of the memory budget.
    """

    def __init__(self, sources, *, seed: int = 0, shuffle: bool = True, window_bytes: int | None = WINDOW_BYTES,
                 window: int | None = None, lanes: int = 1, policy: str = "drop", columns=None,
                 sequence_length: int | None = None, token_column: str = "tokens", eos_id: int | None = None,
                 samples_per_epoch: int | None = None, rank: int | None = None, world_size: int | None = None,
                 verify: bool = False, epoch: int = 0, cache_dir=None, cache_limit_bytes: int | None = None):
        sources = list(sources)
        if not sources:
            raise LoaderError("a mixture needs at least one source: [(path, weight), ...]")
        self.schedule = Schedule([w for _, w in sources])
        budget = None if window_bytes is None else max(1, int(window_bytes) // len(sources))
        common = dict(rank=0, world_size=1, shuffle=shuffle, window_bytes=budget, window=window, lanes=1,
                      verify=verify, cache_dir=cache_dir, cache_limit_bytes=cache_limit_bytes)
        if sequence_length is not None:
            self.readers = [SequenceReader(p, sequence_length=sequence_length, token_column=token_column,
                                           eos_id=eos_id, seed=int(stream_key(seed, i, 7) >> np.uint64(1)),
                                           **common) for i, (p, _) in enumerate(sources)]
            types = {r.dtype for r in self.readers}
            if len(types) > 1:
                raise LoaderError(f"the sources' token columns have different types {sorted(map(str, types))}; "
                                  "mix builds tokenized to one type")
        else:
            if columns is None:
                names = [ShardReader(p, **common).columns for p, _ in sources]
                columns = [c for c in names[0] if all(c in n for n in names[1:])]
            self.readers = [ShardReader(p, seed=int(stream_key(seed, i, 7) >> np.uint64(1)), columns=columns,
                                        **common) for i, (p, _) in enumerate(sources)]
            self._check_types(sources)
        if samples_per_epoch is None:
            samples_per_epoch = self._one_pass_length()
        self.samples_per_epoch = int(samples_per_epoch)
        if self.samples_per_epoch < 0:
            raise LoaderError(f"samples_per_epoch must be >= 0, got {samples_per_epoch}")
        self._sequence = sequence_length is not None
        digest = hashlib.sha256(repr(([(r.source.fingerprint, str(w)) for r, w in
                                       zip(self.readers, self.schedule.weights)],
                                      self.samples_per_epoch, sequence_length, token_column, eos_id,
                                      columns)).encode()).hexdigest()[:16]
        self._mixture = _MixtureSource(digest, self.samples_per_epoch,
                                       [token_column] if self._sequence else list(columns))
        super().__init__(None, rank=rank, world_size=world_size, seed=seed, shuffle=shuffle,
                         window_bytes=window_bytes, window=window, lanes=lanes, policy=policy, verify=verify,
                         epoch=epoch)

    def _open(self, path, columns, verify):
        return self._mixture

    def _check_types(self, sources) -> None:
        schemas = [_schema(r) for r in self.readers]
        first = schemas[0]
        for (path, _), r, other in zip(sources[1:], self.readers[1:], schemas[1:]):
            if first is None or other is None:
                continue
            for c in r.columns:
                if first.field(c).type != other.field(c).type:
                    raise LoaderError(f"column {c!r} is {first.field(c).type} in {sources[0][0]} but "
                                      f"{other.field(c).type} in {path}; mixed builds must agree")

    def _one_pass_length(self) -> int:
        """The largest M whose schedule reads no source past its own epoch's length."""
        totals = np.array([r.total for r in self.readers], dtype=np.int64)
        guess = min(int(t / float(w)) for t, w in zip(totals, self.schedule.weights)) + 2
        while guess > 0 and (self.schedule.counts(guess) > totals).any():
            guess -= 1
        return guess

    @property
    def total(self) -> int:
        return self.samples_per_epoch

    def order(self):
        raise LoaderError("a mixture has no single epoch order; see MixtureReader.schedule")

    def _cursor(self, *, threads: bool, ahead: int | None):
        return _MixtureCursor(self, threads)

    def _join(self, parts):
        if self._sequence:
            return parts[0] if len(parts) == 1 else np.concatenate(parts)
        return one_table(parts)

"""Determinism lives here: document ids, content hashes and the shard-id function,
on the Spark side and in pure Python, defined once.

Shard contract: `shard = pmod(xxhash64(key), num_shards)` with Spark's built-in
`xxhash64` (XXH64, seed 42, over the UTF-8 bytes of a string key or the 8
little-endian bytes of a long key). `shard_of(key, n)` computes the same number in
plain Python, so a trainer or an auditor can find any document's shard without
Spark. Nothing here depends on partitioning, task attempts or wall-clock time.
"""
from __future__ import annotations

import struct

SPARK_HASH_SEED = 42
_M64 = (1 << 64) - 1
_P1 = 11400714785074694791
_P2 = 14029467366897019727
_P3 = 1609587929392839161
_P4 = 9650029242287828579
_P5 = 2870177450012600261


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _M64


def _round(acc: int, lane: int) -> int:
    acc = (acc + lane * _P2) & _M64
    return (_rotl(acc, 31) * _P1) & _M64


def _merge(acc: int, val: int) -> int:
    acc ^= _round(0, val)
    return (acc * _P1 + _P4) & _M64


def xxh64(data: bytes, seed: int = SPARK_HASH_SEED) -> int:
    """XXH64 of `data` as an unsigned 64-bit integer (the reference algorithm)."""
    n = len(data)
    i = 0
    if n >= 32:
        v1 = (seed + _P1 + _P2) & _M64
        v2 = (seed + _P2) & _M64
        v3 = seed & _M64
        v4 = (seed - _P1) & _M64
        while i + 32 <= n:
            a, b, c, d = struct.unpack_from("<4Q", data, i)
            v1, v2, v3, v4 = _round(v1, a), _round(v2, b), _round(v3, c), _round(v4, d)
            i += 32
        h = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _M64
        for v in (v1, v2, v3, v4):
            h = _merge(h, v)
    else:
        h = (seed + _P5) & _M64
    h = (h + n) & _M64
    while i + 8 <= n:
        (k,) = struct.unpack_from("<Q", data, i)
        h ^= _round(0, k)
        h = (_rotl(h, 27) * _P1 + _P4) & _M64
        i += 8
    if i + 4 <= n:
        (k,) = struct.unpack_from("<I", data, i)
        h ^= (k * _P1) & _M64
        h = (_rotl(h, 23) * _P2 + _P3) & _M64
        i += 4
    while i < n:
        h ^= (data[i] * _P5) & _M64
        h = (_rotl(h, 11) * _P1) & _M64
        i += 1
    h ^= h >> 33
    h = (h * _P2) & _M64
    h ^= h >> 29
    h = (h * _P3) & _M64
    h ^= h >> 32
    return h


def _key_bytes(key: str | bytes | int) -> bytes:
    if isinstance(key, bool):
        raise TypeError("shard keys are strings, bytes or integers, not bool")
    if isinstance(key, str):
        return key.encode("utf-8", "surrogatepass")
    if isinstance(key, bytes):
        return key
    if isinstance(key, int):
        return struct.pack("<q", key)
    raise TypeError(f"shard keys are strings, bytes or integers, got {type(key).__name__}")


def spark_xxhash64(key: str | bytes | int) -> int:
    """Spark's `xxhash64(key)` as a signed 64-bit integer (string, binary or bigint key)."""
    h = xxh64(_key_bytes(key))
    return h - (1 << 64) if h >= (1 << 63) else h


def shard_of(key: str | bytes | int, num_shards: int) -> int:
    """The shard that holds `key`: Spark's `pmod(xxhash64(key), num_shards)`."""
    if num_shards < 1:
        raise ValueError(f"num_shards must be >= 1, got {num_shards}")
    return spark_xxhash64(key) % num_shards  # Python's % is already pmod


# --- Spark side -------------------------------------------------------------------

def shard_expr(key_col: str, num_shards: int):
    """Column expression of the shard id, the one the contract names."""
    from pyspark.sql import functions as F

    return F.expr(f"pmod(xxhash64(`{key_col}`), {int(num_shards)})").cast("int")


def key_hash_expr(key_col: str):
    """The in-shard sort key: xxhash64 of the key (rows sort by it, then by the key)."""
    from pyspark.sql import functions as F

    return F.xxhash64(F.col(key_col))


def derived_id_expr(text_col: str = "text", source_col: str = "source"):
    """A stable document id from content and source: 32 hex chars of
    sha256(source || 0x1f || text). Null parts count as empty strings."""
    from pyspark.sql import functions as F

    return F.substring(F.sha2(F.concat_ws("\u001f", F.coalesce(F.col(source_col), F.lit("")),
                                          F.coalesce(F.col(text_col), F.lit(""))), 256), 1, 32)


def derived_id(text: str | None, source: str | None) -> str:
    """The pure-Python twin of `derived_id_expr`."""
    import hashlib

    data = f"{source or ''}\u001f{text or ''}".encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).hexdigest()[:32]


def sample_id(source: str, key: str) -> str:
    """The id of a WebDataset sample whose json names none: 32 hex chars of
    sha256("webdataset" || 0x1f || source || 0x1f || key), where `source` is the tar's path
    relative to the input root and `key` the sample's key in it. Depends on neither the
    sample's position nor the listing order, and stays when the corpus moves."""
    import hashlib

    data = f"webdataset\u001f{source}\u001f{key}".encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).hexdigest()[:32]


def hashable_columns(fields) -> list:
    """Spark Columns for `xxhash64` over a row's fields (StructFields): Spark cannot hash maps,
    so a map-holding field enters as its JSON text (entries in stored order)."""
    from pyspark.sql import functions as F

    return [F.to_json(F.struct(F.col(f"`{f.name}`"))) if _has_map(f.dataType) else F.col(f"`{f.name}`")
            for f in fields]


def _has_map(t) -> bool:
    from pyspark.sql.types import ArrayType, MapType, StructType

    if isinstance(t, MapType):
        return True
    if isinstance(t, ArrayType):
        return _has_map(t.elementType)
    if isinstance(t, StructType):
        return any(_has_map(f.dataType) for f in t.fields)
    return False

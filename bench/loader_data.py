"""Shard builds for the loader benchmark, generated (no download), deterministic from a seed.

Profiles (16 uneven shards, the writer's default settings: zstd, 1024-row groups):
* `text`: `id` int64, `tokens` list<int32> of 512, `text` of 2-12 KB (triangular, mean about
  6 KB): words drawn with Zipf frequencies from a 30,000-word vocabulary in which about
  one word in 50 is non-ASCII (as in web text: almost every document has some), so most
  Python strings are UCS-2, as real ones are;
* `tokens`: `id` int64, `tokens` list<int32> of 2,048 (token ids with Zipf frequencies);
* `toy`: the earlier benchmark's rows (`tokens` of 128, `text` of about 45 characters).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa

PROFILES = {"text": dict(tokens=512, text=True), "tokens": dict(tokens=2048, text=False),
            "toy": dict(tokens=128, text="toy")}
COLUMNS = {"text": ["id", "tokens", "text"], "tokens": ["id", "tokens"], "toy": ["id", "tokens", "text"]}
_EXTRA = ["café", "naïve", "über", "日本語", "данные", "θέμα", "—", "“quoted”", "São", "Zürich"]


def _zipf_table(rng, n: int, size: int = 1 << 20, a: float = 1.1) -> np.ndarray:
    """`size` draws from a Zipf law over range(n): gathering from it at random is a fast
    Zipf sampler."""
    p = 1.0 / np.arange(1, n + 1) ** a
    return rng.choice(n, size=size, p=p / p.sum()).astype(np.int32)


def _base_text(rng, chars: int) -> str:
    letters = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz", dtype=np.uint8)
    vocab = [bytes(rng.choice(letters, int(rng.integers(2, 11)))).decode() for _ in range(30_000)]
    for i in range(0, 30_000, 50):                 # one word in 50 (by rank) is non-ASCII
        vocab[i + 7] = _EXTRA[(i // 50) % len(_EXTRA)] + vocab[i + 7][:3]
    ids = _zipf_table(rng, len(vocab))[rng.integers(0, 1 << 20, chars // 5)]
    return " ".join(vocab[i] for i in ids.tolist())


def _shard(rng, profile: str, start: int, n: int, zipf: np.ndarray, base: str | None) -> pa.Table:
    spec = PROFILES[profile]
    width = spec["tokens"]
    toks = zipf[rng.integers(0, len(zipf), n * width)]
    cols = {"id": pa.array(np.arange(start, start + n, dtype=np.int64)),
            "tokens": pa.ListArray.from_arrays(np.arange(0, n * width + 1, width, dtype=np.int32), toks)}
    if spec["text"] == "toy":
        cols["text"] = pa.array([f"document number {j} of the benchmark corpus" for j in range(start, start + n)])
    elif spec["text"]:
        lengths = rng.triangular(2048, 4096, 12288, n).astype(np.int64)
        offsets = rng.integers(0, len(base) - 12288, n)
        cols["text"] = pa.array([base[o:o + k] for o, k in zip(offsets.tolist(), lengths.tolist())])
    return pa.table(cols)


def make_build(out: Path, profile: str, rows: int, shards: int = 16) -> None:
    """Write the build (once: an existing manifest.json is kept)."""
    from shardforge.shards.writer import ShardWriter, WriterSettings, new_staging_dir, publish_build

    if (out / "manifest.json").exists():
        return
    rng = np.random.default_rng(0)
    weights = np.array([1 + (i * 7) % 5 for i in range(shards)], dtype=float)
    sizes = np.floor(rows * weights / weights.sum()).astype(int)
    sizes[0] += rows - sizes.sum()
    zipf = _zipf_table(rng, 32_000)
    base = _base_text(rng, 64 << 20) if PROFILES[profile]["text"] is True else None
    settings = WriterSettings()
    staging = new_staging_dir(str(out))
    infos, start = [], 0
    schema = _shard(rng, profile, 0, 1, zipf, base).schema
    for i, n in enumerate(sizes):
        writer = ShardWriter(staging, i, shards, schema, settings)   # streamed: 10x shards are GBs
        for a in range(0, n, 16_384):
            writer.write(_shard(rng, profile, start + a, min(16_384, n - a), zipf, base))
        infos.append(writer.close())
        start += n
    publish_build(str(out), staging, infos, schema, key="id", config={}, source={}, settings=settings)

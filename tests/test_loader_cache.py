"""The loader's remote shard cache, against a real build served by a real HTTP server on
127.0.0.1 (tests/fileserver.py) that counts the requests: the second epoch fetches nothing,
the budget holds at every fetch, LRU eviction, a corrupted copy is fetched again, and
concurrent readers fetch a shard once (the others seen blocked on its lock file in the kernel's
lock table, /proc/locks). Expected rows and checksums come from the build's
files on disk (pyarrow, hashlib), not from the loader."""
from __future__ import annotations

import glob
import hashlib
import json
import os
import threading
import time

import pyarrow.parquet as pq
import pytest

from fileserver import FileServer
from loader_helpers import make_build

SIZES = [40, 0, 33, 27, 50, 19]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """(folder served, build name): one build, written once."""
    root = tmp_path_factory.mktemp("served")
    make_build(root / "b", SIZES, row_group_rows=8)
    return str(root), "b"


def disk_facts(folder: str):
    """{shard file name: (sha256, bytes, ids)} straight from the build's files."""
    out = {}
    for path in sorted(glob.glob(os.path.join(folder, "*", "part-*.parquet"))):
        data = open(path, "rb").read()
        out[os.path.basename(path)] = (hashlib.sha256(data).hexdigest(), len(data),
                                       pq.read_table(path, columns=["id"]).column(0).to_pylist())
    return out


def cache_bytes(cache_dir: str) -> int:
    """Bytes of everything in the cache folder except its empty lock files."""
    if not os.path.isdir(cache_dir):
        return 0
    return sum(os.path.getsize(os.path.join(cache_dir, n)) if not n.endswith(".part")
               else int(n.split(".")[1]) for n in os.listdir(cache_dir) if not n.endswith(".lock"))


def shard_gets(srv) -> list[str]:
    return [os.path.basename(p) for p in srv.requests(".parquet")]


def shard_requests(srv) -> list[str]:
    """Every request for a shard file, whatever the method (GET, HEAD)."""
    return [os.path.basename(p) for m, p, _r in list(srv.log) if p.endswith(".parquet")]


def epoch_ids(ds, epoch: int, workers: int = 2) -> list[int]:
    from torch.utils.data import DataLoader

    from shardforge.loaders import no_collate

    ds.set_epoch(epoch)
    loader = DataLoader(ds, batch_size=None, num_workers=workers, collate_fn=no_collate)
    return [int(i) for batch in loader for i in batch["id"]]


def test_second_epoch_from_cache_and_corrupt_copy_fetched_again(served, tmp_path):
    from shardforge.loaders import ShardedDataset

    folder, name = served
    facts = disk_facts(os.path.join(folder, name))
    expected = sorted(i for _s, _b, ids in facts.values() for i in ids)
    budget = sum(b for _s, b, _i in facts.values())       # every shard fits, nothing to spare
    cache = str(tmp_path / "cache")
    peaks: list[int] = []

    def check(method, path, rng):   # runs in the server as each request arrives
        peaks.append(cache_bytes(cache))
        if method == "GET" and path.endswith(".parquet") and rng is None:   # a whole-shard fetch
            sha, size, _ids = facts[os.path.basename(path)]
            fetching.append(os.path.exists(os.path.join(cache, f"{sha}.{size}.part")) and
                            not os.path.exists(os.path.join(cache, f"{sha}.parquet")))

    fetching: list[bool] = []
    with FileServer(folder, on_request=check) as srv:
        ds = ShardedDataset(f"{srv.url}/{name}", seed=3, batch_size=8, batched=True, lanes=2,
                            cache_dir=cache, cache_limit_bytes=budget)
        before = len(srv.log)
        assert sorted(epoch_ids(ds, 0)) == expected
        # every non-empty shard fetched whole, once, though two workers read them
        whole = [os.path.basename(p) for m, p, r in srv.log[before:] if m == "GET" and p.endswith(".parquet")]
        assert sorted(whole) == sorted(n for n, (_s, _b, ids) in facts.items() if ids)
        assert all(r is None for m, p, r in srv.log[before:] if p.endswith(".parquet"))
        assert fetching == [True] * len(whole)    # each fetch wrote a reservation, never the copy's name
        n1 = len(shard_requests(srv))
        second = epoch_ids(ds, 1)
        assert sorted(second) == expected
        assert shard_requests(srv)[n1:] == []                # epoch 2: no shard request at all
        again = ShardedDataset(f"{srv.url}/{name}", seed=3, batch_size=8, batched=True, lanes=2,
                               cache_dir=cache, cache_limit_bytes=budget)   # a restarted process
        assert sorted(epoch_ids(again, 1)) == expected
        assert shard_requests(srv)[n1:] == []                # its footers come from the copies too
        assert max(peaks) <= budget and cache_bytes(cache) <= budget
        assert srv.errors == []

        # flip bytes inside one copy, keeping its size and mtime: found by sha256, fetched again
        victim = max(facts, key=lambda n: facts[n][1])
        sha = facts[victim][0]
        copy = os.path.join(cache, f"{sha}.parquet")
        st = os.stat(copy)
        with open(copy, "r+b") as fh:
            fh.seek(st.st_size // 2)
            b = fh.read(4)
            fh.seek(st.st_size // 2)
            fh.write(bytes(x ^ 0xFF for x in b))
        os.utime(copy, ns=(st.st_atime_ns, st.st_mtime_ns))
        n2 = len(shard_gets(srv))
        third = epoch_ids(ds, 2)
        assert shard_gets(srv)[n2:] == [victim]             # only the corrupted shard, once
        assert sorted(third) == sorted(epoch_ids(ShardedDataset(os.path.join(folder, name), seed=3,
                                                                batch_size=8, batched=True, lanes=2), 2, 0))
        assert hashlib.sha256(open(copy, "rb").read()).hexdigest() == sha
        assert srv.errors == []


def test_small_budget_evicts_and_is_never_exceeded(served, tmp_path):
    """A budget of the two largest shards: every epoch must evict, the folder stays within
    the budget at every fetch, and the rows are still the build's."""
    from shardforge.loaders import ShardedDataset

    folder, name = served
    facts = disk_facts(os.path.join(folder, name))
    expected = sorted(i for _s, _b, ids in facts.values() for i in ids)
    sizes = sorted(b for _s, b, ids in facts.values() if ids)
    budget = sizes[-1] + sizes[-2]
    cache = str(tmp_path / "cache")
    seen: list[int] = []
    with FileServer(folder, on_request=lambda m, p, r: seen.append(cache_bytes(cache))) as srv:
        ds = ShardedDataset(f"{srv.url}/{name}", seed=1, batch_size=8, batched=True, lanes=2,
                            cache_dir=cache, cache_limit_bytes=budget)
        for epoch in range(2):
            assert sorted(epoch_ids(ds, epoch)) == expected
            assert cache_bytes(cache) <= budget
        fetched = [p for m, p, r in srv.log if m == "GET" and p.endswith(".parquet") and r is None]
        assert len(fetched) > len(sizes)          # evicted copies were fetched again in epoch 2
        assert len(seen) == len(srv.log) and max(seen) <= budget
        assert srv.errors == []
    left = {n for n in os.listdir(cache) if n.endswith(".parquet")}
    assert left and left <= {f"{s}.parquet" for s, _b, _i in facts.values()}


def _shards(folder: str, name: str, url: str):
    """(url, sha256, bytes) of the build's non-empty shards, from its manifest file."""
    m = json.load(open(os.path.join(folder, name, "manifest.json")))
    return [(f"{url}/{name}/{s['file']}", s["sha256"], s["bytes"]) for s in m["shards"] if s["rows"]]


def test_lru_order(served, tmp_path):
    """Room for two of three shards: opening A, B, A, C evicts B (least recently opened), not A."""
    from shardforge.loaders.cache import ShardCache

    folder, name = served
    with FileServer(folder) as srv:
        a, b, c = sorted(_shards(folder, name, srv.url), key=lambda s: s[2])[:3]
        cache = ShardCache(str(tmp_path / "c"), a[2] + b[2] + c[2] - min(a[2], b[2], c[2]) // 2)
        for i, (url, sha, size) in enumerate([a, b, a, c]):
            f = cache.open(url, sha, size, index=i)
            assert hashlib.sha256(f.read()).hexdigest() == sha
            f.close()
            assert cache.usage() <= cache.limit
        left = {n[:-len(".parquet")] for n in os.listdir(cache.root) if n.endswith(".parquet")}
        assert left == {a[1], c[1]}
        assert [os.path.basename(p) for p in srv.requests(".parquet")] == \
            [os.path.basename(u) for u, _s, _b in (a, b, c)]


def flock_state(path: str) -> tuple[int, int]:
    """(held, waiting): flock locks granted on the file at `path`, and lock requests blocked on
    it, as the kernel lists them in /proc/locks (a blocked request's line has "->")."""
    st = os.stat(path)
    ident = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    held = waiting = 0
    with open("/proc/locks") as f:
        for line in f:
            fields = line.split()
            if "FLOCK" in fields and fields[fields.index("FLOCK") + 4] == ident:
                if "->" in fields:
                    waiting += 1
                else:
                    held += 1
    return held, waiting


@pytest.mark.skipif(not os.path.exists("/proc/locks"), reason="observes the waiting in /proc/locks (Linux)")
def test_concurrent_readers_fetch_once(served, tmp_path):
    """Four threads open one shard at once. The server holds the first GET until the test has
    seen, in the kernel's lock table, the fetching thread hold the shard's lock file and the
    three others blocked on it (the machine-wide lock that DataLoader workers share, not some
    in-process wait); then one GET in all, and every thread reads the whole, right file."""
    from shardforge.loaders.cache import ShardCache

    folder, name = served
    hold = threading.Event()

    def slow(method, path, rng):
        if method == "GET" and path.endswith(".parquet"):
            hold.wait(120)                      # released by the test (a liveness bound, not a timing)

    with FileServer(folder, on_request=slow) as srv:
        url, sha, size = _shards(folder, name, srv.url)[0]
        cache = ShardCache(str(tmp_path / "c"), size)
        lock = os.path.join(cache.root, f"{sha}.lock")
        got: list[str] = []

        def reader():
            f = cache.open(url, sha, size, index=0)
            got.append(hashlib.sha256(f.read()).hexdigest())

        threads = [threading.Thread(target=reader, daemon=True) for _ in range(4)]
        try:
            for t in threads:
                t.start()
            seen, fetching = (0, 0), []
            for _ in range(6000):               # until the kernel and the server show it (a liveness bound):
                seen = flock_state(lock) if os.path.exists(lock) else (0, 0)
                fetching = srv.requests(".parquet")     # the lock holder's GET may still be on its way
                if (seen == (1, 3) and fetching) or not any(t.is_alive() for t in threads):
                    break
                time.sleep(0.01)
            assert seen == (1, 3), f"lock {lock}: {seen[0]} held, {seen[1]} waiting; want 1 and 3"
            assert len(srv.requests(".parquet")) == 1 and not got       # one fetch in flight, nothing read
            assert not os.path.exists(cache.path_of(sha))
        finally:
            hold.set()
            for t in threads:
                t.join(120)
        assert got == [sha] * 4
        assert len(srv.requests(".parquet")) == 1
        assert flock_state(lock) == (0, 0)


def test_stale_reservation_is_reclaimed(served, tmp_path):
    """A reservation left by a killed fetch (no lock held) does not block the budget."""
    from shardforge.loaders.cache import ShardCache

    folder, name = served
    with FileServer(folder) as srv:
        url, sha, size = _shards(folder, name, srv.url)[0]
        cache = ShardCache(str(tmp_path / "c"), size)
        os.makedirs(cache.root)
        stale = os.path.join(cache.root, f"{'0' * 64}.{size}.part")
        open(stale, "wb").close()
        got: list = []
        t = threading.Thread(target=lambda: got.append(cache.open(url, sha, size, index=0)), daemon=True)
        t.start()
        t.join(30)                  # a liveness guard (a wrong cache waits forever), not a timing check
        assert not t.is_alive(), "the fetch is still waiting for room held by a dead reservation"
        assert hashlib.sha256(got[0].read()).hexdigest() == sha
        assert not os.path.exists(stale) and cache.usage() == size


def test_shard_larger_than_budget_is_an_error(served, tmp_path):
    from shardforge.loaders import LoaderError, ShardReader

    folder, name = served
    facts = disk_facts(os.path.join(folder, name))
    with FileServer(folder) as srv:
        with pytest.raises(LoaderError, match=r"shard \d+ of .* has \d+ bytes, more than cache_limit_bytes=1000"):
            ShardReader(f"{srv.url}/{name}", cache_dir=str(tmp_path / "c"), cache_limit_bytes=1000)
        with pytest.raises(LoaderError, match="cache_dir and cache_limit_bytes go together"):
            ShardReader(f"{srv.url}/{name}", cache_dir=str(tmp_path / "c"))
        ok = ShardReader(f"{srv.url}/{name}", cache_dir=str(tmp_path / "c"),
                         cache_limit_bytes=max(b for _s, b, _i in facts.values()))
        assert sorted(i for t in ok.iter_batches(64) for i in t.column("id").to_pylist()) == \
            sorted(i for _s, _b, ids in facts.values() for i in ids)


def test_token_and_mixed_datasets_read_through_the_cache(served, tmp_path):
    """TokenDataset and MixedDataset take the same options and read the same samples as
    from the local build; a second pass makes no shard request."""
    from shardforge.loaders import MixedDataset, TokenDataset

    folder, name = served
    local = os.path.join(folder, name)
    cache = str(tmp_path / "c")
    with FileServer(folder) as srv:
        remote = f"{srv.url}/{name}"
        tok = dict(sequence_length=16, seed=2)
        want = [x.tolist() for x in TokenDataset(local, **tok)]
        ds = TokenDataset(remote, cache_dir=cache, cache_limit_bytes=10 << 20, **tok)
        assert [x.tolist() for x in ds] == want
        n = len(srv.requests(".parquet"))
        assert [x.tolist() for x in ds] == want and len(srv.requests(".parquet")) == n
        mix = dict(seed=4, columns=["id"])
        want = [int(s["id"]) for s in MixedDataset([(local, 0.5), (local, 0.5)], **mix)]
        mixed = MixedDataset([(remote, 0.5), (local, 0.5)], cache_dir=cache, cache_limit_bytes=10 << 20, **mix)
        k = len(srv.requests(".parquet"))             # after construction (footers read remotely)
        assert [int(s["id"]) for s in mixed] == want
        assert len(srv.requests(".parquet")) == k     # shards already cached (shared by content)


def test_interrupted_fetch_leaves_no_copy(served, tmp_path):
    """A download cut off halfway fails the read and leaves neither a copy nor a reservation;
    the next read fetches the shard whole."""
    from shardforge.loaders.cache import ShardCache

    folder, name = served
    with FileServer(folder) as srv:
        url, sha, size = _shards(folder, name, srv.url)[0]
        srv.truncate.add(os.path.basename(url))
        cache = ShardCache(str(tmp_path / "c"), size)
        with pytest.raises(Exception):          # the transport's error (aiohttp: payload not completed)
            cache.open(url, sha, size, index=0)
        assert [n for n in os.listdir(cache.root) if not n.endswith(".lock")] == []
        f = cache.open(url, sha, size, index=0)
        assert hashlib.sha256(f.read()).hexdigest() == sha
        assert len(srv.requests(".parquet")) == 2



def test_s3_build_is_cached(served, s3_server, tmp_path):
    """The same cache over s3:// (moto's S3 API on 127.0.0.1): after one epoch with two workers
    the shard objects are deleted from the bucket, and the second epoch still reads every row."""
    from s3server import BUCKET, restore_env, s3fs_client, set_env

    from shardforge.loaders import ShardedDataset

    folder, name = served
    facts = disk_facts(os.path.join(folder, name))
    expected = sorted(i for _s, _b, ids in facts.values() for i in ids)
    fs = s3fs_client(s3_server)
    prefix = f"{BUCKET}/cache-test-{os.getpid()}"
    fs.put(os.path.join(folder, name), f"{prefix}/{name}", recursive=True)
    old = set_env(s3_server.env)
    try:
        ds = ShardedDataset(f"s3://{prefix}/{name}", seed=7, batch_size=8, batched=True, lanes=2,
                            cache_dir=str(tmp_path / "c"), cache_limit_bytes=sum(b for _s, b, _i in facts.values()))
        assert sorted(epoch_ids(ds, 0)) == expected
        parts = fs.glob(f"{prefix}/{name}/*/part-*.parquet")
        assert len(parts) == len(SIZES)
        fs.rm(parts)
        assert sorted(epoch_ids(ds, 1)) == expected
    finally:
        restore_env(old)
        fs.rm(prefix, recursive=True)


def test_remote_bytes_that_differ_from_the_manifest_are_not_cached(served, tmp_path):
    """A remote file of another size is refused before it is fetched; one of the right size
    with other bytes is fetched, fails its sha256 and is dropped; a missing one is named.
    Nothing is left in the cache."""
    from shardforge.shards.manifest import ManifestError
    from shardforge.loaders.cache import ShardCache

    folder, name = served
    with FileServer(folder) as srv:
        (url, sha, size), (url2, sha2, size2) = _shards(folder, name, srv.url)[:2]
        cache = ShardCache(str(tmp_path / "c"), max(size, size2))
        with pytest.raises(ManifestError, match=rf"checksum mismatch for shard 7 .*: {size2} bytes != manifest {size}"):
            cache.open(url2, sha, size, index=7)
        assert srv.requests(".parquet") == []                 # only a HEAD: nothing downloaded
        with pytest.raises(ManifestError, match=rf"checksum mismatch for shard 7 .*sha256 {sha} .*!= manifest {'0' * 64}"):
            cache.open(url, "0" * 64, size, index=7)
        assert len(srv.requests(".parquet")) == 1
        with pytest.raises(ManifestError, match="shard 7 is missing"):
            cache.open(url + ".gone", sha, size, index=7)
        assert [n for n in os.listdir(cache.root) if not n.endswith(".lock")] == []

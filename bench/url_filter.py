"""The URL filter (`shardforge.clean.urls`) on one core: URLs/s against a block list of about a
million domains, beside baselines timed in the same run, and the memory of the loaded lists.

    .venv/bin/python bench/url_filter.py [--domains 1000000] [--urls 1000000] [--rounds 3]

Data (synthetic, seeded, written to a temp folder in UT1's layout): one category `adult` with
--domains distinct domains (labels of 5-14 letters and digits under 12 TLDs, a tenth of them
listed as subdomains, a twentieth with `www.`) and --domains/10 `urls` entries (host + 1-3
path segments), plus banned words (6) and soft banned words (10). --urls URLs: 8 % on a listed
domain or below it, 2 % on a listed page or below it, the rest on unlisted hosts (a third of
them one letter away from a listed domain; 1 % with a banned word in a path segment, 1 % with
two soft banned words), http or https, 0-4 path segments, a query on a quarter; kept in an
Arrow array and a Parquet file.

Timed per round, CPU seconds of this process (time.process_time; the machine is shared, wall
seconds are given too), median of alternated rounds, all on one core:
- filter: `UrlFilter.labels` over the URLs in Arrow batches of 10,000 (as mapInArrow hands
  them), lists and words on, tables already built (each Python worker builds them once);
- read: the URL column read from its Parquet file (zstd) into Arrow: reading the URLs alone;
- urlsplit: `urllib.parse.urlsplit(u).hostname` per URL: the host alone, the plain-Python way.
Ratios are filter / baseline. Memory: the pickled filter (what a task receives), the growth of
this process's RSS while the lookup tables are built and the bytes they hold (tracemalloc, on a
second build), with the time a build takes (once per Python worker) and the driver's load time.
"""
from __future__ import annotations

import argparse
import json
import os
import pickle
import random
import shutil
import statistics
import string
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from urllib.parse import urlsplit

import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from shardforge.clean import urls as urlmod  # noqa: E402
from shardforge.clean.urls import UrlFilter  # noqa: E402

TLDS = ("com", "net", "org", "de", "fr", "ru", "info", "co.uk", "io", "nl", "xyz", "com.br")
ALNUM = string.ascii_lowercase + string.digits
BANNED = ("porn", "xxx", "sex", "nude", "escort", "milf")
SOFT = ("hot", "girls", "live", "cam", "free", "teen", "adult", "video", "dating", "chat")
BATCH = 10_000


def _label(rng, lo=5, hi=14) -> str:
    return "".join(rng.choices(ALNUM, k=rng.randint(lo, hi)))


def _path(rng, segments: int) -> str:
    return "".join("/" + _label(rng, 3, 10) for _ in range(segments))


def make_data(folder: Path, n_domains: int, n_urls: int, seed: int = 1):
    rng = random.Random(seed)
    domains = set()
    while len(domains) < n_domains:
        d = f"{_label(rng)}.{rng.choice(TLDS)}"
        if rng.random() < 0.1:
            d = f"{_label(rng, 2, 6)}.{d}"
        domains.add(d)
    domains = sorted(domains)
    rng.shuffle(domains)
    pages = [f"{_label(rng)}.{rng.choice(TLDS)}{_path(rng, rng.randint(1, 3))}" for _ in range(n_domains // 10)]
    cat = folder / "adult"
    cat.mkdir(parents=True)
    with open(cat / "domains", "w") as fh:
        fh.write("# synthetic\n")
        fh.writelines(("www." + d if i % 20 == 0 else d) + "\n" for i, d in enumerate(domains))
    with open(cat / "urls", "w") as fh:
        fh.writelines(p + "\n" for p in pages)

    urls = []
    for _ in range(n_urls):
        r = rng.random()
        scheme = rng.choice(("http", "https"))
        if r < 0.08:
            host = rng.choice(domains)
            host = rng.choice(("", "www.", _label(rng, 2, 6) + ".")) + host
            rest = _path(rng, rng.randint(0, 4))
        elif r < 0.10:
            page = rng.choice(pages)
            host, rest = page.split("/", 1)[0], "/" + page.split("/", 1)[1] + _path(rng, rng.randint(0, 2))
        else:
            if rng.random() < 0.3:   # one letter away from a listed domain
                d = rng.choice(domains)
                i = rng.randrange(len(d.split(".")[0]))
                host = d[:i] + rng.choice(ALNUM) + d[i + 1:]
            else:
                host = f"{rng.choice(('', 'www.', 'blog.'))}{_label(rng)}.{rng.choice(TLDS)}"
            rest = _path(rng, rng.randint(0, 4))
            w = rng.random()
            if w < 0.01:
                rest += f"/{_label(rng, 3, 6)}-{rng.choice(BANNED)}-{_label(rng, 3, 6)}"
            elif w < 0.02:
                rest += "/" + "-".join(rng.sample(SOFT, 2))
        query = f"?id={rng.randint(0, 10**6)}&q={_label(rng, 3, 8)}" if rng.random() < 0.25 else ""
        urls.append(f"{scheme}://{host}{rest}{query}")
    return pa.array(urls, pa.string())


def _rss() -> int:
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def _cpu(fn) -> tuple[float, float]:
    w, c = time.perf_counter(), time.process_time()
    fn()
    return time.process_time() - c, time.perf_counter() - w


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--domains", type=int, default=1_000_000)
    ap.add_argument("--urls", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default="")
    a = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="urlbench-"))
    urls = make_data(tmp / "ut1", a.domains, a.urls)
    pq.write_table(pa.table({"url": urls}), tmp / "urls.parquet", compression="zstd")
    size = {f.name: os.path.getsize(f) for f in (tmp / "ut1" / "adult").iterdir()}

    t0 = time.process_time()
    f = UrlFilter.build([str(tmp / "ut1")], BANNED, SOFT, 2)
    load_cpu = time.process_time() - t0
    shipped = len(pickle.dumps(f))
    g = pickle.loads(pickle.dumps(f))
    urlmod._TABLES.clear()
    rss0 = _rss()
    t0 = time.process_time()
    g._tables()
    tables_cpu = time.process_time() - t0
    rss_tables = _rss() - rss0           # first, without tracemalloc's own bookkeeping
    urlmod._TABLES.clear()
    tracemalloc.start()
    g._tables()
    traced, traced_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    entries = tuple(len(t) for t in g._tables()[:2])

    batches = [urls.slice(i, BATCH) for i in range(0, len(urls), BATCH)]
    labels = [lab for b in batches for lab in g.labels(b)]

    def run_filter():
        for b in batches:
            g.labels(b)

    def run_read():
        pq.read_table(tmp / "urls.parquet", columns=["url"])

    def run_split():
        for u in urls.to_pylist():
            urlsplit(u).hostname

    sides = {"filter": run_filter, "read": run_read, "urlsplit": run_split}
    times: dict[str, list] = {k: [] for k in sides}
    for _ in range(a.rounds):
        for k, fn in sides.items():
            times[k].append(_cpu(fn))
    med = {k: (statistics.median(c for c, _ in v), statistics.median(w for _, w in v)) for k, v in times.items()}
    n = len(urls)
    result = {
        "domains": a.domains, "urls": n, "rounds": a.rounds, "loadavg": os.getloadavg(),
        "list_file_bytes": size, "table_entries": {"domains": entries[0], "urls": entries[1]},
        "driver_load_cpu_s": round(load_cpu, 2), "pickled_filter_bytes": shipped,
        "tables_build_cpu_s": round(tables_cpu, 2), "tables_traced_bytes": traced, "tables_traced_peak_bytes": traced_peak, "tables_rss_bytes": rss_tables,
        "blocked": sum(lab is not None for lab in labels),
        "by_label": {k: sum(lab == k for lab in labels) for k in sorted({x for x in labels if x})},
        "cpu_s": {k: round(v[0], 3) for k, v in med.items()}, "wall_s": {k: round(v[1], 3) for k, v in med.items()},
        "urls_per_cpu_s": {k: round(n / v[0]) for k, v in med.items()},
        "filter_over": {k: round(med["filter"][0] / med[k][0], 2) for k in ("read", "urlsplit")},
    }
    shutil.rmtree(tmp)
    print(json.dumps(result, indent=1))
    if a.out:
        Path(a.out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()

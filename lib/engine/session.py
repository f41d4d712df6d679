"""Builds the SparkSession every job uses, with Delta Lake enabled.

Delta's JVM side comes either from local jars (`make jars` fills `.jars/`, handed to
Spark with `spark.jars`; works without internet) or from `spark.jars.packages`
(`[spark] packages = true`, for clusters that reach Maven Central). Under
`spark-submit`, settings given on the command line or in `--properties-file` win:
the builder only fills in what is not already set.
"""
from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from pathlib import Path

from shardforge.config import SparkSection

DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"

# Fixed for determinism and for small local runs; every key can be overridden in
# [spark] properties or by spark-submit.
DEFAULTS = {
    "spark.sql.extensions": DELTA_EXTENSION,
    "spark.sql.catalog.spark_catalog": DELTA_CATALOG,
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.ui.showConsoleProgress": "false",
    "spark.databricks.delta.schema.autoMerge.enabled": "false",
    "spark.sql.adaptive.enabled": "true",
    # Batches follow row width, not only a row count: an Arrow batch to Python (mapInArrow) is
    # cut at 64 MiB, and the vectorised Parquet reader decodes 1,024 rows at a time (not 4,096):
    # 6 KB documents with 2,048 tokens each stay a few MB per batch.
    "spark.sql.execution.arrow.maxBytesPerBatch": str(64 << 20),
    "spark.sql.parquet.columnarReaderBatchSize": "1024",
}


def driver_memory(total_bytes: int | None = None) -> str:
    """The heap of an embedded `local[...]` session: a quarter of the machine's memory, at
    least 1 GiB and at most 32 GiB (Spark's own default, 1 GiB, is too small for real
    documents: the tokenize stage's output alone can exhaust it). `spark-submit` and
    `[spark] properties` ("spark.driver.memory") override it."""
    if total_bytes is None:
        try:
            total_bytes = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError, AttributeError):   # pragma: no cover - not a POSIX machine
            total_bytes = 4 << 30
    mib = min(max(total_bytes // 4 >> 20, 1024), 32 << 10)
    return f"{mib}m"


# An embedded session's JVM does all of the run's JVM work, and on short runs compiling it costs
# more than it saves: with Java's default tiers the C2 compiler took a fifth of a 2-core
# machine's time through a 50,000-document ingest and clean. With the first compiler only
# (C1) the FineWeb recipe's ingest, clean and table writes took 19% less time at 20,000
# documents (110 MB) and 11% less at 200,000 (1.2 GB); BENCHMARKS.md, "The embedded JVM's
# compiler". Above QUICK_JIT_MAX_INPUT (not measured) the JVM's default tiers stay.
QUICK_JIT = "-XX:TieredStopAtLevel=1"
QUICK_JIT_MAX_INPUT = 2 << 30


def input_size(paths, limit: int | None = None) -> int | None:
    """Bytes under the given local paths (files, or folders walked); None when any of them
    is not a local path that exists (an object store, HDFS): its size is not known here.
    With `limit`, the walk stops once the total is past it (the result is then some size
    above `limit`): a folder of a million files is not walked to the end for that answer."""
    total = 0
    for p in paths:
        p = str(p)
        if p.startswith("file:"):
            p = "/" + p[len("file:"):].lstrip("/")
        elif "://" in p:
            return None
        if not os.path.exists(p):
            return None
        if os.path.isfile(p):
            total += os.path.getsize(p)
            continue
        for d, _dirs, names in os.walk(p):
            for n in names:
                try:
                    total += os.path.getsize(os.path.join(d, n))
                except OSError:
                    pass
            if limit is not None and total > limit:
                return total
    return total


# Spark generates and compiles (Janino) Java code for each query's expressions, row orderings
# and fused stages. In a fresh JVM that costs tens to hundreds of milliseconds a query, which on
# a stage of a few hundred rows is most of its time. On wide rows in volume the generated code
# wins by far (build-shards on 17,000 tokenized rows: 18-19 s interpreted, 6-7 s generated), so
# only small stages run interpreted: a row stage under `[spark] codegen_min_rows` input rows, a
# stage reading local files under `codegen_min_input_bytes` (BENCHMARKS.md, "Small stages on
# interpreted expressions"). Results are the same either way: Spark's interpreted expressions
# are the reference its generated code is tested against, and tests/test_codegen.py compares
# the two on a whole run.
INTERPRETED = {"spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"}


@contextmanager
def interpreted(spark, on: bool):
    """Inside, with `on`: the session plans its queries on interpreted expressions; yields
    whether it does. Either key set by the user when the session started (spark-submit --conf,
    `[spark] properties`) leaves the session as it is."""
    if not on or any(spark.sparkContext.getConf().contains(k) for k in INTERPRETED):
        yield False
        return
    before = {k: spark.conf.get(k, None) for k in INTERPRETED}
    for k, v in INTERPRETED.items():
        spark.conf.set(k, v)
    try:
        yield True
    finally:
        for k, v in before.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)


def jit_options(cfg: SparkSection, size: int | None) -> str:
    """The embedded session's compiler option by `[spark] jit`: "quick" the first tier only,
    "full" the JVM's default, "auto" quick when the run's input is local and at most
    QUICK_JIT_MAX_INPUT bytes (`size`, from input_size; None = not known: the default)."""
    if cfg.jit == "quick" or (cfg.jit == "auto" and size is not None and size <= QUICK_JIT_MAX_INPUT):
        return QUICK_JIT
    return ""


def driver_java_options(conf: dict[str, str], cfg: SparkSection, input_bytes: int | None) -> str | None:
    """The options an embedded local session gives its JVM: the class-data archive `make
    setup` builds (cds.py) and the compiler's (jit_options). None when the user set
    `spark.driver.extraJavaOptions`; no compiler option when SPARK_SUBMIT_OPTS sets one."""
    from shardforge.engine.cds import java_options

    if conf.get("spark.driver.extraJavaOptions"):
        return None
    opts = [java_options(conf)]
    if "Tiered" not in os.environ.get("SPARK_SUBMIT_OPTS", ""):
        opts.append(jit_options(cfg, input_bytes))
    return " ".join(o for o in opts if o) or None


def delta_package() -> str:
    """The Maven coordinate of delta-spark matching the installed pyspark and delta-spark."""
    from importlib import metadata

    spark_minor = ".".join(metadata.version("pyspark").split(".")[:2])
    return f"io.delta:delta-spark_{spark_minor}_2.13:{metadata.version('delta-spark')}"


def find_jars(jars_dir: str | os.PathLike) -> list[str]:
    """Jar paths in `jars_dir` (relative paths are tried from the CWD, then the repo)."""
    candidates = [Path(jars_dir)]
    if not Path(jars_dir).is_absolute():
        candidates.append(Path(__file__).resolve().parents[2] / jars_dir)
    env = os.environ.get("SHARDFORGE_JARS")
    if env:
        candidates.insert(0, Path(env))
    for d in candidates:
        jars = sorted(str(p.resolve()) for p in d.glob("*.jar"))
        if jars:
            return jars
    return []


def spark_conf(cfg: SparkSection) -> dict[str, str]:
    """The settings `get_spark` applies (before anything spark-submit already set)."""
    conf = dict(DEFAULTS)
    conf["spark.sql.shuffle.partitions"] = str(cfg.shuffle_partitions)
    if cfg.packages:
        conf["spark.jars.packages"] = delta_package()
    else:
        jars = find_jars(cfg.jars_dir)
        if jars:
            conf["spark.jars"] = ",".join(jars)
    conf.update(cfg.properties)
    return conf


def local_cores(master: str) -> int:
    """The task slots of a `local`, `local[N]`, `local[*]` or `local[N,F]` master."""
    inside = master[len("local["):-1] if master.startswith("local[") else "1"
    first = inside.split(",")[0].strip()
    if first == "*":
        return os.cpu_count() or 1
    try:
        return max(int(first), 1)
    except ValueError:
        return 1


def _local_conf(master: str) -> dict[str, str]:
    """An embedded `local[...]` session binds to loopback only, with a heap sized from the
    machine (`driver_memory`), and sizes two things from its cores rather than from a
    cluster's defaults: Delta's log replay (`snapshotPartitions`, 50 by default: a
    50-task Spark job after every commit, about 4 s each on 2 cores) runs in one task per
    core, and files are split into at least 3 tasks per core
    (`spark.sql.files.minPartitionNum`; Spark's default is one per core, so one slow split
    leaves the other cores idle through the CPU-heavy stages; files under 4 MB stay whole)."""
    if not master.startswith("local"):
        return {}
    cores = local_cores(master)
    return {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
            "spark.driver.memory": driver_memory(),
            "spark.databricks.delta.snapshotPartitions": str(cores),
            "spark.sql.files.minPartitionNum": str(3 * cores)}


def get_spark(cfg: SparkSection | None = None, *, master: str | None = None, input_bytes: int | None = None):
    """Get or create the session. Raises a clear error when Delta's jars are missing.
    `input_bytes`: the run's input size when known (input_size), for `[spark] jit = "auto"`."""
    from pyspark.sql import SparkSession

    cfg = cfg or SparkSection()
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    builder = SparkSession.builder
    # Launched by spark-submit: the JVM is up and its settings win over ours.
    submitted = bool(os.environ.get("PYSPARK_GATEWAY_PORT"))
    if not submitted:
        builder = builder.master(master or cfg.master).appName(cfg.app_name)
    conf = spark_conf(cfg)
    if not submitted:
        conf = {**_local_conf(master or cfg.master), **conf}
        if (master or cfg.master).startswith("local"):
            # Python workers run the driver's interpreter (and so see the same packages).
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
            opts = driver_java_options(conf, cfg, input_bytes)
            if opts:
                conf["spark.driver.extraJavaOptions"] = opts
    if "spark.jars" not in conf and "spark.jars.packages" not in conf and not submitted:
        raise RuntimeError(
            f"Delta Lake jars not found in {cfg.jars_dir!r}: run `make jars` "
            f"(or `python -m shardforge.deploy.jvm_deps --dest {cfg.jars_dir}`), or set "
            f"[spark] packages = true to fetch {delta_package()} with spark.jars.packages")
    existing = None
    if submitted:
        from pyspark import SparkConf, SparkContext

        SparkContext._ensure_initialized()  # connect to spark-submit's JVM, so SparkConf sees its settings
        existing = SparkConf()
    for key, value in conf.items():
        if existing is not None and existing.contains(key):
            continue
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("SHARDFORGE_SPARK_LOG_LEVEL", "WARN"))
    return spark


WARM_UP_GROUP = "shardforge-warm-up"


def _pass_batches(batches):
    yield from batches


def warm_up(spark, cores: int):
    """Start one Python worker per core with Arrow loaded, in a background thread: a job of
    `cores` one-row tasks through mapInArrow. The first job of a run otherwise pays this
    inside its first tasks (the workers' start and imports, Arrow's classes and first
    code generation: 4-5 s of a 2-core run's first stage), after the driver has planned it;
    started as soon as the session is up, it overlaps the driver's own start of the run
    (input listing, run state, planning). Returns the thread (join it before stopping the
    session), or None when `SHARDFORGE_WARM_UP=0`. A failure here is only logged: the
    run's own first job starts its workers as before."""
    import logging

    from pyspark import InheritableThread

    if os.environ.get("SHARDFORGE_WARM_UP", "1") == "0":
        return None

    def run():
        try:
            spark.sparkContext.setJobGroup(WARM_UP_GROUP, "start the Python workers")
            (spark.range(cores, numPartitions=cores).mapInArrow(_pass_batches, "id long")
             .write.format("noop").mode("overwrite").save())
        except Exception as exc:   # noqa: BLE001 - a warm-up never fails a run
            logging.getLogger(__name__).debug("warm-up job failed: %s", exc)

    # an InheritableThread closes its connection to the JVM when it ends, so its job group is
    # never carried by a later thread's jobs
    thread = InheritableThread(target=run, name="shardforge-warm-up", daemon=True)
    thread.start()
    return thread


def build_class_archive(force: bool = False):
    """The class-data archive (shardforge.engine.cds) for the default session's class path."""
    from shardforge.config import SparkSection as _Spark
    from shardforge.engine.cds import build

    return build(spark_conf(_Spark()), force)


if __name__ == "__main__":
    if "--class-archive" in sys.argv:
        build_class_archive(force="--force" in sys.argv)   # never fails the set-up: without one, sessions start as before

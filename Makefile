# The two commands a new user needs:  `make demo`  and  `make test`.
# Everything else here is what they depend on. Each step skips what is already done.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
JARS   ?= .jars
HADOOP_JARS ?= .hadoop-jars
PYTEST_ARGS ?=
# `make test` runs the suite on this many pytest-xdist workers, a test module at a time (the
# long modules start first: tests/conftest.py); TEST_WORKERS=0 runs it in one process.
TEST_WORKERS ?= 2
export SHARDFORGE_JARS := $(abspath $(JARS))
export SHARDFORGE_HADOOP_JARS := $(abspath $(HADOOP_JARS))
export SPARK_LOCAL_IP ?= 127.0.0.1

.PHONY: demo test test-stress setup setup-demo jdk test-system-deps system-deps jars hadoop-jars cds venv bench package clean-out help

help:
	@echo "make demo   - set up, run the whole pipeline on the bundled sample, read it with the torch loader"
	@echo "make test   - set up and run the test suite (slow tests included)"
	@echo "make test-stress - the test suite while two busy processes hold both cores"
	@echo "make bench  - run the benchmarks in bench/ (minutes; see BENCHMARKS.md)"
	@echo "make package - build dist/ artifacts for spark-submit on a cluster"

venv: $(PY)
$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip setuptools wheel

# pip skips requirements that are already satisfied, so a second run takes seconds
# (torch, the large one, is downloaded once per venv).
# `setup-demo` is what the demo needs (Spark, Delta's jars, torch); `setup` adds the test and
# bench dependencies, Hadoop's minicluster and hadoop-aws jars, and Chromium.
setup-demo: venv jdk
	$(PY) -m pip install -q -e '.[spark,torch]'
	@$(MAKE) --no-print-directory jars cds

setup: venv jdk test-system-deps
	$(PY) -m pip install -q -e '.[dev]'
	@$(MAKE) --no-print-directory hadoop-jars cds

# Java (with javac, for the mini Hadoop cluster's launcher) and Maven for Spark and the jars.
# Installed with apt-get when running as root on Debian; otherwise a hint is printed.
jdk:
	@command -v java >/dev/null && command -v javac >/dev/null && command -v mvn >/dev/null || \
	  { if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	      apt-get update -qq && apt-get install -y -qq --no-install-recommends \
	        $$(command -v javac >/dev/null || echo openjdk-17-jdk-headless) \
	        $$(command -v mvn >/dev/null || echo maven) >/dev/null; \
	    else echo "note: install a JDK 17 and Maven (Debian: apt-get install openjdk-17-jdk-headless maven)"; fi; }

# Chromium, for the report's screenshot test.
test-system-deps:
	@command -v chromium >/dev/null || \
	  { if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	      apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium >/dev/null; \
	    else echo "note: install Chromium (Debian: apt-get install chromium)"; fi; }

system-deps: jdk test-system-deps

# Delta's JVM jars, matching the installed pyspark and delta-spark, into $(JARS) (git-ignored).
jars: venv
	@$(PY) -m shardforge.deploy.jvm_deps --pom jvm/pom.xml --dest $(JARS)

# The embedded session's class-data archive (lib/engine/cds.py: the JVM starts in half
# the time), once per JDK and jar set, into ~/.cache/shardforge/cds (about 1 min, 190 MB).
cds: jars
	@$(PY) -m shardforge.engine.session --class-archive

# Hadoop's minicluster (the YARN/HDFS tests) and hadoop-aws (s3a://), at pyspark's Hadoop
# version, into $(HADOOP_JARS) (git-ignored): only the tests and s3a:// users need them.
hadoop-jars: venv   # (Delta's jars too: one resolution)
	@$(PY) -m shardforge.deploy.jvm_deps --pom jvm/pom.xml --dest $(JARS) --hadoop-dest $(HADOOP_JARS)

demo: setup-demo
	$(PY) -m shardforge.jobs.demo --conf conf/demo.toml --output out/demo

test: setup
	$(PY) -m pytest tests -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)

test-stress: setup
	PYTHON=$(PY) TEST_WORKERS=$(TEST_WORKERS) PYTEST_ARGS="$(PYTEST_ARGS)" .ci/stress

bench: setup
	$(PY) bench/build_shards.py
	$(PY) bench/loader.py
	$(PY) bench/redact.py
	$(PY) bench/dedup.py --sizes 100000 1000000 --datatrove
	$(PY) bench/corpus.py --docs 100000 --out .bench/corpus-100k.jsonl
	$(PY) bench/corpus.py --docs 1000000 --out .bench/corpus-1m.jsonl
	$(PY) bench/dedup_e2e.py --corpus .bench/corpus-100k.jsonl --work .bench/e2e --label after-100k --rounds 2 --datatrove
	$(PY) bench/dedup_e2e.py --corpus .bench/corpus-1m.jsonl --work .bench/e2e1m --label after-1m --no-quality
	$(PY) bench/dedup_prepare.py --corpus .bench/corpus-100k.jsonl
	$(PY) bench/download.py
	$(PY) bench/extract.py --sample 200
	$(PY) bench/langid.py --per-language 200
	$(PY) bench/realtext.py --out .bench/quality/corpus.jsonl
	$(PY) bench/quality.py --corpus .bench/quality/corpus.jsonl
	$(PY) bench/export_megatron.py --docs 100000 --length 2048 --rounds 3
	$(PY) bench/url_filter.py --rounds 5 --out bench/results/url_filter.json
	$(PY) bench/score.py --docs 20000 --rounds 3
	$(PY) bench/decontaminate.py --docs 20000 --ngrams 1200000 --rounds 3

# --venv-archive: the wheel (with the compiled quality kernel) in a venv for spark.archives
package: setup
	$(PY) -m shardforge.deploy.packaging --dist dist --venv-archive

clean-out:
	rm -rf out spark-warehouse metastore_db derby.log

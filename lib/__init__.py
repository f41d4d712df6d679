"""shardforge: raw corpora in, deterministic training shards out.

Importing this package pulls in nothing heavy: no Spark, no torch. Spark-side
modules import pyspark themselves, so the loader works where Spark is absent.
"""
__version__ = "0.1.0"

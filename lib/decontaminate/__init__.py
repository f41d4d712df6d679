"""Benchmark decontamination: the `decontaminate` stage (word n-gram overlap, GPT-3 style).

    from shardforge.decontaminate import load_index, decontaminate, summary
    index = load_index(cfg.decontaminate)          # on the driver, once
    res = decontaminate(df, index, annotate=cfg.quality.mode == "annotate")

`ngrams` owns normalisation, hashing and the index (no Spark); `benchmarks` reads the
benchmark files; `stage` runs the scan on Spark and writes the report section.
"""
from shardforge.decontaminate.stage import decontaminate, load_index, summary

__all__ = ["decontaminate", "load_index", "summary"]

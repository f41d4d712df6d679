"""Exact and near-duplicate removal: the `dedup` stage, its side table and its report.

    from shardforge.dedup import dedup, read_side_table, update_side_table, summary
    res = dedup(df, cfg.dedup, previous=read_side_table(spark, side_path), checkpoint_dir=tmp)
    # write res.kept / res.rejected / res.audit, then:
    update_side_table(spark, res.signatures, side_path)

Rules (normalisation, short documents, images, bands x rows, incremental semantics)
are in this folder's README.md.
"""
from shardforge.dedup.minhash import MinHashParams, derive_bands_rows
from shardforge.dedup.report import summary
from shardforge.dedup.side_table import SIDE_TABLE, SideTableMismatch, read_side_table, update_side_table
from shardforge.dedup.stage import DedupResult, dedup, params_key, resolve_params

__all__ = ["DedupResult", "MinHashParams", "SIDE_TABLE", "SideTableMismatch", "dedup", "derive_bands_rows",
           "params_key", "read_side_table", "resolve_params", "summary", "update_side_table"]

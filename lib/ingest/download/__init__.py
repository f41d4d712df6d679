"""The downloader: URL lists in, pages and images fetched politely on Spark
executors, one result row per URL, resumable. See README.md in this folder."""
from shardforge.ingest.download.stage import RESULT, TIMING_COLS, DownloadResult, check_config, download, kept_documents, rejected_rows, \
    summary, summary_dict, url_id, url_id_expr
from shardforge.ingest.download.urls import read_url_list
from shardforge.ingest.download.resume import clear_spool, load_previous, merge_results, read_spool

__all__ = ["RESULT", "TIMING_COLS", "DownloadResult", "check_config", "download", "kept_documents", "rejected_rows", "summary",
           "summary_dict", "url_id", "url_id_expr", "read_url_list", "clear_spool", "load_previous",
           "merge_results", "read_spool"]

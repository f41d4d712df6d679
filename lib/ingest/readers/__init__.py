"""Document files read in Python, one file per Spark task, streamed: compressed JSONL
(`.gz`, `.bz2`, `.zst`), WARC/WET archives and WebDataset tars. `files` decides each file's
format by its extension; `streams` (JSONL, WARC) and `wds` (tars) hold the pure per-file
readers (no Spark); `spark` runs them with `mapInArrow` and turns their rows into documents,
rejects and record counts."""

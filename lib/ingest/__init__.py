"""The ingest stage family: reading document files and web inputs (readers/, extract/) and downloading URL lists (download/) into DOCUMENT rows."""

"""HTML pages to main text with a maintained library (resiliparse), under a per-document
time bound. `extract_page` is the kernel; `Sandbox` runs it in a child process so that no
page (deeply nested, huge, binary) can crash or hang the Spark task. See README.md."""
from shardforge.ingest.extract.html import EXTRACTOR, Page, extract_page, extractor_info  # noqa: F401
from shardforge.ingest.extract.sandbox import Sandbox  # noqa: F401

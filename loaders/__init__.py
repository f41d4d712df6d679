"""shardforge.loaders: read a shard build for training, with no Spark (and, for the
Arrow iterator, no torch).

    from shardforge.loaders import ShardedDataset      # torch IterableDataset
    from shardforge.loaders import ShardReader         # pyarrow batches, no torch

See loaders/README.md for usage, the state fields and the resume recipes.
"""
from __future__ import annotations

from . import assignment, state
from .reader import ShardReader
from .source import LoaderError
from .state import StateError

__all__ = ["ShardedDataset", "collate", "no_collate", "ShardReader", "LoaderError", "StateError", "assignment", "state"]


def __getattr__(name):  # torch is imported only when the torch dataset is asked for
    if name == "ShardedDataset":
        from .dataset import ShardedDataset

        return ShardedDataset
    if name in ("collate", "no_collate"):
        from . import convert

        return getattr(convert, name)
    raise AttributeError(f"module 'shardforge.loaders' has no attribute {name!r}")

"""shardforge.loaders: read a shard build for training, with no Spark (and, for the
Arrow iterator, no torch).

    from shardforge.loaders import ShardedDataset      # torch IterableDataset of rows
    from shardforge.loaders import TokenDataset        # packed token sequences
    from shardforge.loaders import MixedDataset        # a weighted mixture of builds
    from shardforge.loaders import ShardReader         # pyarrow batches, no torch
    from shardforge.loaders import SequenceReader      # numpy token sequences, no torch

See loaders/README.md for usage, the state fields and the resume recipes.
"""
from __future__ import annotations

from . import assignment, state
from .reader import ShardReader
from .source import LoaderError
from .state import StateError
from .mixture import MixtureReader, Schedule
from .tokens import SequenceReader

__all__ = ["ShardedDataset", "TokenDataset", "MixedDataset", "MixtureReader", "Schedule", "collate", "no_collate", "ShardReader", "SequenceReader",
           "LoaderError", "StateError", "assignment", "state"]


def __getattr__(name):  # torch is imported only when a torch dataset is asked for
    if name in ("ShardedDataset", "TokenDataset", "MixedDataset"):
        from . import dataset

        return getattr(dataset, name)
    if name in ("collate", "no_collate"):
        from . import convert

        return getattr(convert, name)
    raise AttributeError(f"module 'shardforge.loaders' has no attribute {name!r}")

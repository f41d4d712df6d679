"""The shard build: the Spark side (build), the pyarrow writer and publication (writer), the manifest and the WebDataset export."""

"""The curated corpus: the Delta tables a pipeline keeps (curated documents, rejects)."""

"""The tokenize stage family: token ids of each document's text."""

"""Corpus-scale explanations: read a table of texts, explain in batches into resumable Parquet chunks,
aggregate the deciding words per predicted class."""

"""Corpus-scale explanations: read a table of texts, explain in batches into resumable Parquet chunks,
aggregate the deciding words per predicted class."""
from rollout_core.extras import require

require("pyarrow", "corpus")  # every module here reads or writes Arrow/Parquet: say so once, before any of them loads

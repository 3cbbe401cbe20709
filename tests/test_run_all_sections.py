"""benchmarks/run_all.py keeps the RESULTS.md sections it does not produce (hand-run ones such as load_server)."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from run_all import kept_sections  # noqa: E402

PREVIOUS = """# Benchmark results

Produced by an older run.

## Machine

- CPU: old

## bench_flow.py

```
old flow output
## not a heading: inside the script's output
```

## load_server.py (run by hand)

kept text

## bench_gone.py

a script that no longer exists: kept, nothing replaces it
"""


def test_sections_it_does_not_produce_are_kept_in_order():
    kept = kept_sections(PREVIOUS, {"## bench_flow.py", "## bench_evaluate.py"})
    assert kept == ["## load_server.py (run by hand)\n\nkept text\n",
                    "## bench_gone.py\n\na script that no longer exists: kept, nothing replaces it\n"]


def test_nothing_is_kept_from_an_empty_file():
    assert kept_sections("", {"## bench_flow.py"}) == []

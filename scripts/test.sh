#!/usr/bin/env bash
# Installs everything (the project, editable, with every extra, the test tools and Debian's chromium) and runs the
# whole test suite (unit, AppTest and real-browser tests); pytest options pass through.
# pytest's exit code 5 (no tests collected) is treated as a failure.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh all || exit 1
# Two workers (pytest-xdist; the suite is single-threaded and CI has 2 cores), each test file whole on one of them
# and the browser tests together, scheduled first (tests/conftest.py; collection order, the longest group first);
# TEST_WORKERS=0 runs it in this one process.
"${PYTHON:-python3}" -m pytest -n "${TEST_WORKERS:-2}" --dist loadgroup --no-loadscope-reorder "$@"
rc=$?
if [ "$rc" -eq 5 ]; then echo "error: pytest collected no tests" >&2; exit 1; fi
exit "$rc"

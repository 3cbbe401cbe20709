#!/usr/bin/env bash
# Installs everything and runs the whole test suite (unit, AppTest and real-browser tests).
# pytest's exit code 5 (no tests collected) is treated as a failure.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh || exit 1
"${PYTHON:-python3}" -m pytest "$@"
rc=$?
if [ "$rc" -eq 5 ]; then echo "error: pytest collected no tests" >&2; exit 1; fi
exit "$rc"

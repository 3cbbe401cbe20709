#!/usr/bin/env bash
# Installs everything and starts the dashboard on the embedded default models.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
exec "${PYTHON:-python3}" -m streamlit run app.py "$@"

#!/usr/bin/env bash
# Installs what the dashboard needs (the project, editable, with its [app] extras; no test tools, browser or Ray),
# builds the embedded models once, and starts the dashboard on them. Streamlit options pass through:
# `bash scripts/start.sh --server.port 8600`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh dashboard
exec "${PYTHON:-python3}" -m streamlit run app.py "$@"

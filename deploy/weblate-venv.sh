#!/usr/bin/env bash
# Makes .venv-weblate: Weblate 2026.10.1 and only what its machinery modules and Django start import,
# for tests/api/test_weblate_stack.py, which drives Weblate's own backends against a real stack.
# Weblate needs Python >= 3.12; its full install builds C libraries (borgbackup, tesserocr), so it is
# installed without its dependencies, from the pinned list beside this script.
set -euo pipefail

cd "$(dirname "$0")/.."
VENV=${WEBLATE_VENV:-.venv-weblate}
REQUIREMENTS=deploy/weblate-requirements.txt

find_python() {
  local candidate
  for candidate in "${WEBLATE_PYTHON:-}" python3.13 python3.12 /root/.pyenv/versions/3.12.1/bin/python \
    "$HOME/.pyenv/versions/3.12.1/bin/python"; do
    [ -n "$candidate" ] || continue
    if command -v "$candidate" >/dev/null 2>&1 &&
      "$candidate" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' 2>/dev/null; then
      echo "$candidate"
      return 0
    fi
  done
  return 1
}

if [ -f "$VENV/.requirements" ] && cmp -s "$VENV/.requirements" "$REQUIREMENTS"; then
  exit 0 # already made from this list
fi
if ! PY=$(find_python); then
  echo "weblate-venv.sh: no Python >= 3.12 (set WEBLATE_PYTHON); the Weblate test will be skipped" >&2
  exit 0
fi
rm -rf "$VENV"
"$PY" -m venv "$VENV"
# --no-compile: byte-compiling Django and Weblate took most of the 10 minutes this took on a loaded
# 2-core machine; without it 52 s. The test imports only a few of these modules.
bash deploy/pip-install.sh "$VENV" -q --no-deps --no-compile -r "$REQUIREMENTS"
cp "$REQUIREMENTS" "$VENV/.requirements"

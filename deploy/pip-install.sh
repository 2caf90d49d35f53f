#!/usr/bin/env bash
# pip-install.sh VENV ARGS...: `pip install ARGS` into VENV, by uv where UV names one (install.sh puts one
# in .venv, and goes on with pip where it cannot), else by the venv's own pip. The same packages either
# way: uv is given this machine's pip configuration (indexes, wheel folders and constraints, from pip.conf
# and PIP_* variables, which uv does not read), chooses among all the indexes as pip does, and compiles
# bytecode as pip does unless --no-compile. EXCLUDE="NAME..." keeps packages out of uv's install (its
# caller uninstalls them after pip's). uv made the CPU venv in 36 s with an empty cache and 15 s with a
# warm one (before bytecode), where pip took 2.5 min and more: it downloads side by side, and links what
# its cache has.
set -euo pipefail

venv=$1
shift

# pip_sources PYTHON: pip's configured index-url, extra-index-url, find-links and constraint as uv's
# flags, one word a line.
pip_sources() {
  "$1" -m pip config list 2>/dev/null | "$1" -c '
import ast, sys
flags = {"index-url": "--index-url", "extra-index-url": "--extra-index-url",
         "find-links": "--find-links", "constraint": "--constraint"}
for line in sys.stdin:
    key, _, value = line.strip().partition("=")
    flag = flags.get(key.rpartition(".")[2])
    for item in ast.literal_eval(value).split() if flag else []:
        print(flag)
        print(item)
'
}

excluded=""

by_uv() {
  local sources=() excludes=() names=() args=() arg compile=(--compile-bytecode)
  mapfile -t sources < <(pip_sources "$venv/bin/python")
  for arg in "$@"; do
    if [ "$arg" = --no-compile ]; then compile=(); else args+=("$arg"); fi
  done
  read -ra names <<<"${EXCLUDE:-}"
  if [ ${#names[@]} -gt 0 ]; then
    excluded=$(mktemp)
    trap 'rm -f "$excluded"' EXIT
    printf '%s\n' "${names[@]}" >"$excluded"
    excludes=(--excludes "$excluded")
  fi
  "$UV" pip install --python "$venv/bin/python" --index-strategy unsafe-best-match ${compile[@]+"${compile[@]}"} \
    ${sources[@]+"${sources[@]}"} ${excludes[@]+"${excludes[@]}"} "${args[@]}"
}

if [ -n "${UV:-}" ] && [ -x "$UV" ]; then
  by_uv "$@"
else
  "$venv/bin/pip" install "$@"
fi

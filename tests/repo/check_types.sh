#!/usr/bin/env bash
# mypy with the repository's mypy.ini over every Python file git tracks in the tools folder, and over the
# Python package as built (PACKAGE/roundscope: the package's files beside the stub of its
# compiled core, _core.pyi), strictly on the public API: exit 1, naming each finding, otherwise.
# Usage: check_types.sh [REPO [PACKAGE [CACHE]]]; mypy from the .venv tools/setup.sh makes (or
# $ROUNDSCOPE_PYTHON). CACHE: mypy's cache folder (default: a temporary one, removed after).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
python=${ROUNDSCOPE_PYTHON:-$root/.venv/bin/python}
repo=${1:-$root}
package=${2:-}
cache=${3:-}
"$python" -m mypy --version > /dev/null 2>&1 || { echo "check_types.sh: no mypy in $python (tools/setup.sh installs it)"; exit 1; }
cd "$repo"
mapfile -t files < <(git ls-files tools | grep '\.py$')
search=""
for folder in $(printf '%s\n' "${files[@]}" | xargs -r -n1 dirname | sort -u); do search="$search:$repo/$folder"; done
if [ -n "$package" ]; then
  files+=("$package"/roundscope/*.py)
  search="$package$search"
fi
if [ -z "$cache" ]; then
  cache=$(mktemp -d)
  trap 'rm -rf "$cache"' EXIT
fi
if ! MYPYPATH="${search#:}" "$python" -m mypy --config-file mypy.ini --cache-dir "$cache" --no-error-summary "${files[@]}"; then
  echo "check_types.sh: Python files fail mypy.ini's checks (see above)"
  exit 1
fi

#!/usr/bin/env bash
# Every Python file the repository tracks passes ruff with the repository's ruff.toml (pyflakes:
# unused and undefined names; pycodestyle: errors, warnings, lines of at most 120): exit 1,
# naming each finding, otherwise. ruff comes from the .venv tools/setup.sh makes (or $RUFF).
set -euo pipefail
ruff=${RUFF:-$(cd "$(dirname "$0")/../.." && pwd)/.venv/bin/ruff}
cd "${1:-$(dirname "$0")/../..}"
[ -x "$ruff" ] || { echo "check_python.sh: no ruff at $ruff (tools/setup.sh installs it in .venv)"; exit 1; }
if ! git ls-files -z '*.py' | xargs -0 "$ruff" check --no-cache --config ruff.toml --output-format concise; then
  echo "check_python.sh: Python files fail ruff.toml's rules (see above)"
  exit 1
fi

#!/usr/bin/env bash
# A generated document is what its generator prints now: exit 1 with the differing lines
# otherwise. Usage: check_generated_doc.sh DOC COMMAND...  (e.g. docs/recipe-keys.md roundscope
# recipes --markdown). Regenerate with the command: `COMMAND > DOC`.
set -euo pipefail
doc="$1"
shift
if ! diff -u "$doc" <("$@"); then
  echo "check_generated_doc.sh: $doc is not what '$*' prints; regenerate it with: $* > $doc"
  exit 1
fi

#!/usr/bin/env bash
# Usage: check_install.sh REPO.  With the python/polyc first on PATH, import
# polyc.frontend and polyc.backends and run `polyc --help`, from outside the
# repository and from its root.
set -euo pipefail
repo=$1
for where in "$(mktemp -d)" "$repo"; do
  (cd "$where"
   python -c "import polyc, polyc.frontend.tc, polyc.backends.c.emit, sys; \
print('polyc', polyc.__version__, 'from', polyc.__file__)"
   python -c "from polyc.backends.c.emit import INTRINSICS; \
assert (INTRINSICS / 'gemm.h').is_file(), 'gemm.h is not installed'"
   polyc --help > /dev/null
   echo "ok: import polyc.frontend and polyc --help in $where")
done

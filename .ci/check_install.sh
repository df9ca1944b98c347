#!/usr/bin/env bash
# Usage: check_install.sh REPO.  With the python/polyc first on PATH, import
# polyc.frontend and polyc.backends and run `polyc --help`, from outside the
# repository and from its root.
set -euo pipefail
repo=$1
for where in "$(mktemp -d)" "$repo"; do
  (cd "$where"
   python -c "import polyc, polyc.frontend.tc, polyc.backends.c.emit, polyc.backends.cuda.emit, sys; \
print('polyc', polyc.__version__, 'from', polyc.__file__)"
   python -c "from polyc.backends.c.intrinsics import DIRECTORY, library_source; \
assert all((DIRECTORY / h).is_file() for h in ('gemm.h', 'gemm_api.h')), \
'gemm.h / gemm_api.h are not installed'; library_source()"
   polyc --help > /dev/null
   echo "ok: import polyc.frontend and polyc --help in $where")
done

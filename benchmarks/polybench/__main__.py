"""``python -m benchmarks.polybench``: see :mod:`benchmarks.polybench.run`."""
import sys

from .run import main

sys.exit(main())

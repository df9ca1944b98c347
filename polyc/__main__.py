"""``python -m polyc``: the same command line as the ``polyc`` script
(:func:`polyc.cli.main`)."""

import sys

from .cli import main

sys.exit(main())

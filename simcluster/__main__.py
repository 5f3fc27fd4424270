"""`python -m simcluster ...`: the simcluster CLI (see `simcluster._cli`)."""

import sys

from ._cli import main

sys.exit(main())

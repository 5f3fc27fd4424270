"""`python -m simcluster ...`: the simcluster CLI (see `simcluster.cli.main`)."""

import sys

from .cli.main import main

sys.exit(main())

"""The fault-injection matrix, as CI and developers run it from a checkout.

    python ci/fault_matrix.py --slice ci        # what ci/all.sh runs

The same as `python -m conformance matrix ...`; the matrix lives in `conformance.matrix`
(see `conformance/matrix/cli.py` for the arguments).
"""

import sys

from conformance.matrix.cli import main

if __name__ == "__main__":
    sys.exit(main())

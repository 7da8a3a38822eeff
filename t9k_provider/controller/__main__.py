"""``python -m t9k_provider.controller``: the same as the ``t9k-controller`` console script."""

import sys

from t9k_provider.controller.cli import main

sys.exit(main())

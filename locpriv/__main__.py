"""``python -m locpriv`` runs the command line."""

import sys

from locpriv.cli import main

sys.exit(main())

"""`python -m openneuron.report SCRIPT [ARGS...]`."""

import sys

from .command import main

sys.exit(main())

"""`python -m openneuron ...`: the `openneuron` command (openneuron/tools/cli.py), e.g.
`python -m openneuron report train.py`."""

import sys

from .tools.cli import main

sys.exit(main())

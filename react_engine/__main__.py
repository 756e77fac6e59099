"""``python -m react_engine``: the CLI."""

import sys

from .cli import main

sys.exit(main())

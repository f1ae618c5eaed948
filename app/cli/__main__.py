"""``python -m app.cli``: the ``mcp-setup`` command (client entries written without the script use it)."""

import sys

from .main import main

sys.exit(main())

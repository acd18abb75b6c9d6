from __future__ import annotations

import sys

from annotate.cli import main

sys.exit(main())

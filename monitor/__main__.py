"""``python -m monitor`` — the same as the ``harmonic-monitor`` command."""

from __future__ import annotations

import sys

from monitor.cli import main

sys.exit(main())

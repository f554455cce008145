"""``python -m monitor`` — the same as the ``harmonic-monitor`` command."""

from __future__ import annotations

import sys

from monitor.cli import main

if __name__ == "__main__":  # not when a child process imports it as its parent's main module
    sys.exit(main())

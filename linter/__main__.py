"""Allow `python -m linter`."""

from linter.cli import main

raise SystemExit(main())

"""Allow ``python -m scaler`` (``python -m scaler inspect PATH``)."""

from scaler.cli import main

raise SystemExit(main())

"""`python -m conformance`: the same as the pyops-conformance command."""

from conformance.cli import main

raise SystemExit(main())

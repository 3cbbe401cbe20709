"""`python -m rollout_core ...`: see rollout_core.cli."""
from rollout_core.cli import main

raise SystemExit(main())

"""`python -m burnqed.lean.replay`: run the replay server on stdin/stdout."""

from burnqed.lean.replay.server import main

raise SystemExit(main())

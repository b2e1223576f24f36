"""`python -m minilean.replay`: run the replay server on stdin/stdout."""

from minilean.replay.replay_server import main

raise SystemExit(main())

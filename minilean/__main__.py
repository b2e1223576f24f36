"""`python -m minilean`: the REPL on stdin/stdout."""

import sys

from minilean.server import main

sys.exit(main())

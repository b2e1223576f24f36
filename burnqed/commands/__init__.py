"""The `burnqed` subcommands, one module per area; `burnqed/cli.py` registers them."""

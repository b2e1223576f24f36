"""`python -m burnqed`: the `burnqed` command (burnqed/cli.py), where its console script is not on PATH."""

from burnqed.cli import console

if __name__ == "__main__":
    console()

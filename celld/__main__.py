"""`python -m celld` is the `celld` command."""

from celld.cli.main import main

main()

"""The `celld` command line."""

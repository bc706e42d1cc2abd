"""HTTP: the Starlette app that serves a Worker, and the service that assembles celld."""

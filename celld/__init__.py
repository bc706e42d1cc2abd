"""celld: run Cloudflare Workers and durable Workflows on your own machines."""

__version__ = "0.1.0"

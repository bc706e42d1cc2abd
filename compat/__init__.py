"""celld's compatibility suite: the same Worker projects against celld and `wrangler dev`."""

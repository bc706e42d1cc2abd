"""QuickJS isolates: loading a Worker's modules, the host bridge, limits and threads."""

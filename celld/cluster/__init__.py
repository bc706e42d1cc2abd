"""`celld run --workers N`: N processes on one machine sharing the port and the work.

The parent (celld.cluster.supervisor) binds the listening socket and starts N children,
each a whole `celld run` that accepts on the same socket, so any process answers any
request and a Worker's fetch handler runs in whichever process took it. Workflow
instances are sharded: each lives in the SQLite store of exactly one process, chosen
from its workflow and id (celld.cluster.placement), so SQLite's one-writer-per-file rule
holds and no lease is needed. A binding call for an instance another process owns is
forwarded to it over a local socket (celld.cluster.channel, celld.cluster.router), as
are the operator routes that name one instance (celld.cluster.http). Durable Objects and
D1 databases are owned the same way, their calls forwarded (celld.cluster.bindings); KV
namespaces and R2 buckets are files every process opens, and so is the queue file,
each queue consumed by the one process that owns it (celld.cluster.queues). A child that dies
is started again by the parent; it reopens its own store file and resumes its instances
as a restarted `celld run` does.
"""

"""Durable Objects: one live object per id, each with its own durable storage.

The layer's parts: ``ids`` (the object names the host accepts), ``migrations`` (the class
table built from the config's ``migrations`` and recorded under the state folder),
``index`` (one SQLite file that records applied migrations and every object's alarm),
``storage`` (one SQLite file per object: the KV and SQL APIs, committed once per turn),
``live`` (an object's isolate and its calls) and ``manager`` (activation, idle eviction,
the resident cap and alarms), which the rest of celld reaches through one host operation,
``do``. On a store shared by several nodes: ``placement`` (one owner node per object, calls
forwarded to it, each commit's pages written to PostgreSQL before its output leaves),
``pages`` (the pages a commit changed, read from SQLite's write-ahead log) and
``pgalarms`` (alarms in the object's row).
"""

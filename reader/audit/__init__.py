"""``blockgz audit`` and ``blockgz verify``: is an archive whole, and are its bytes the committed
bytes. One engine (:mod:`~blockgz.reader.audit.auditor`) with one module per kind of finding."""

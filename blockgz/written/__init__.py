"""Objects as they are written, below the record formats whose writers use them.

* :mod:`blockgz.written.upload` writes a block-GZIP object into a store, then its
  ``.index.json`` sidecar;
* :mod:`blockgz.written.sidecars` says where an object's sidecar lives (the hidden name, and the
  older visible one readers still accept);
* :mod:`blockgz.written.files`: :class:`~blockgz.written.files.WrittenFile`, one written object
  as its batch's manifest lists it.

It imports only :mod:`blockgz.blocks`, :mod:`blockgz.store` and :mod:`blockgz.errors`.
"""

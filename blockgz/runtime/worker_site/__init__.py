"""A folder put on the ``PYTHONPATH`` of Spark's Python workers: its ``sitecustomize`` runs at
each worker's start (:mod:`blockgz.runtime.worker_site.sitecustomize`)."""

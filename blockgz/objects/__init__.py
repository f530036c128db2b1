"""Block-GZIP objects in a store: write them with their sidecar, read them by offset or whole.

* :mod:`blockgz.objects.upload` writes an indexed object: data, then its ``.index.json``;
* :mod:`blockgz.objects.indexed` reads one by Kafka offset, one byte range per block;
* :mod:`blockgz.objects.stream` reads any object whole (plain, gzip or block-GZIP);
* :mod:`blockgz.objects.compress` turns local newline-delimited files into indexed objects.
"""

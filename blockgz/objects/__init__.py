"""Indexed objects in a store, read back by Kafka offset or whole; local files made into them.

* :mod:`blockgz.objects.indexed` reads one by Kafka offset, one byte range per block (a Parquet
  object's own footer index too, so this package sits above :mod:`blockgz.formats`);
* :mod:`blockgz.objects.seek` reads one from an offset on, streamed when it has no index (the
  start offset from its key: above :mod:`blockgz.archive`);
* :mod:`blockgz.objects.stream` reads any object whole (plain, gzip or block-GZIP);
* :mod:`blockgz.objects.committed` checks what is read against the manifest entry that committed
  it;
* :mod:`blockgz.objects.compress` turns local newline-delimited files into indexed objects.

Objects are written by :mod:`blockgz.written.upload` and the formats' writers, below.
"""

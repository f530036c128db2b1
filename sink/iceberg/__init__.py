"""An Iceberg table over the archive's Parquet objects: one copy, two views.

:mod:`.settings` reads ``blockgz.iceberg.*``, :mod:`.spec` maps the partitioner to a partition
spec, :mod:`.table` adds each committed batch's files in one Iceberg commit, exactly once.
"""

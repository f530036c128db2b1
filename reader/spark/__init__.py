"""Reading an archive with Spark: the ``blockgz`` batch data source, its scan plan and readers."""

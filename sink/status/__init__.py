"""``blockgz status``: how far each export job's archive is behind Kafka, what it holds back on
purpose, and what is wrong.

* :mod:`blockgz.sink.status.job_status`: :func:`~blockgz.sink.status.job_status.job_status`, one
  job's report;
* :mod:`blockgz.sink.status.report`: the report's rows, issues, JSON, exit code and ``assess``;
* :mod:`blockgz.sink.status.sources`: what the report reads (the catalog, the topics' lives,
  Kafka, the store);
* :mod:`blockgz.sink.status.archive_jobs`: the export jobs an archive holds (``status`` and
  ``audit`` both start from them).
"""

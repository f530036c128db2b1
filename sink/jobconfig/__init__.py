"""The export job's config: what a user writes, read and checked before anything starts.

Below :mod:`blockgz.sink.export` (which runs the job) and above the parts whose options it
routes (the Kafka source, the sink's writer, the store):

* :mod:`blockgz.sink.jobconfig.config`: the config file (Connect ``.properties`` or JSON), split
  into source, sink and Spark settings (:class:`~blockgz.sink.jobconfig.config.ExportSettings`);
* :mod:`blockgz.sink.jobconfig.job_options`: the job's own options (neither the source's nor the
  sink's), declared;
* :mod:`blockgz.sink.jobconfig.settings_names`: which keys are settings, Confluent's refused and
  warned options, and what a mistyped key was meant to be.
* :mod:`blockgz.sink.jobconfig.events`: the job's log as ``blockgz.log.format`` asks, text or
  JSON lines with events.
"""

"""The export jobs whose manifests sit under an archive, each as a config ``blockgz status`` and
``blockgz audit`` can check without the job's own config file.
"""

from __future__ import annotations

from blockgz.sink.jobconfig.config import ExportSettings


def archive_jobs(
    url: str, options: dict[str, str], *, bootstrap_servers: str
) -> list[ExportSettings]:
    """The export jobs whose manifests sit under the archive ``url``, each as a config that
    reads the topics it committed from ``bootstrap_servers`` (``options``: S3 and ``kafka.*``
    settings by their Confluent names).

    >>> import tempfile
    >>> from blockgz.commits.manifest_log import ManifestLog
    >>> from blockgz.archive.layout import Layout
    >>> from blockgz.store import LocalStore
    >>> root = tempfile.mkdtemp()
    >>> _ = ManifestLog(LocalStore(root), "", Layout(), "j").write(0, files=[],
    ...                                                            offsets={"t": {0: 3}})
    >>> [(j.name, j.topics) for j in archive_jobs(root, {}, bootstrap_servers="k:9092")]
    [('j', ['t'])]
    """
    from blockgz.archive.layout import DEFAULT_MANIFEST_DIR
    from blockgz.commits.manifest_log import ManifestLog
    from blockgz.commits.manifests import find_exports
    from blockgz.store import StoreTarget

    store, prefix = StoreTarget.from_url(url, options).open()
    try:
        manifest_dir = options.get("blockgz.manifest.dir", DEFAULT_MANIFEST_DIR)
        found = find_exports(store, prefix, manifest_dir=manifest_dir)
        jobs = []
        for export in found:
            committed = ManifestLog(store, prefix, export.layout, export.name).committed_offsets()
            topics = ",".join(sorted(committed))
            jobs.append(
                ExportSettings.from_mapping(
                    {
                        **options,
                        **export.layout.to_dict(),
                        "path": url,
                        "name": export.name,
                        **({"topics": topics} if topics else {"topics.regex": "(?!)"}),
                        "kafka.bootstrap.servers": bootstrap_servers,
                    }
                )
            )
        return jobs
    finally:
        store.close()

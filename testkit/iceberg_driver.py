"""The export driver's commit of a few batches, in a process of its own, for the Iceberg crash test.

``python -m testkit.iceberg_driver PLAN.json`` reads the sink's options and the batches (each
a batch id, its files as the manifests write them, and its end offsets), runs what
``blockgz export`` runs on start (:func:`blockgz.sink.iceberg.table.catch_up`), then, batch
by batch, the sink's own driver commit (``BlockGzStreamWriter.commit``: the manifest, the
listener, the Iceberg commit). With ``testkit.faults``' ``pause-in-commit`` the process stops
between a batch's manifest and its Iceberg commit, for the test to SIGKILL it there.

The write tasks' part (the Parquet objects) is done by the test beforehand
(:func:`testkit.iceberg.write_parquet`): what is under test is the driver's two commits.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from blockgz.written.files import WrittenFile


def plan_doc(options: dict[str, str], batches: list[tuple[int, list[WrittenFile], Any]]) -> str:
    """The plan file's text: the options and ``(batch id, files, end offsets)`` per batch."""
    return json.dumps(
        {
            "options": options,
            "batches": [
                {"id": b, "files": [f.to_dict() for f in files], "offsets": offsets}
                for b, files, offsets in batches
            ],
        }
    )


def main(path: str) -> None:
    from pyspark.sql.types import StructType

    from blockgz.archive.partition_offsets import merge_offsets
    from blockgz.sink.iceberg.table import catch_up
    from blockgz.sink.write.commit import TaskCommitMessage
    from blockgz.sink.write.config import SinkSettings
    from blockgz.sink.write.datasource import BlockGzStreamWriter
    from testkit.iceberg import ensure_parquet_format

    ensure_parquet_format()
    plan = json.loads(Path(path).read_text())
    options = plan["options"]
    catch_up(options, SinkSettings.from_options(options))  # as blockgz export does on start
    schema = StructType.fromJson(
        {
            "type": "struct",
            "fields": [
                {"name": n, "type": "string", "nullable": True, "metadata": {}}
                for n in ("value", "topic", "partition", "offset")
            ],
        }
    )
    writer = BlockGzStreamWriter(options, schema)
    for batch in plan["batches"]:
        files = [WrittenFile.from_dict(f) for f in batch["files"]]
        message = TaskCommitMessage(files=files, next_offsets=merge_offsets({}, batch["offsets"]))
        writer.commit([message], batch["id"])
        print(f"committed batch {batch['id']}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])

"""Every option set of blockgz, in one visible tuple: the top of the import graph collects them.

Each owner declares its options in one module-level :class:`~blockgz.option_defs.OptionSet`
where they are read (nothing registers on import); :data:`ALL_OPTION_SETS` names every set,
as Connect composes a connector's ``ConfigDef`` from its parts'. ``blockgz options``, the docs'
option reference (``docs/gen_reference.py``) and the test suite's check that only declared
options are read look options up through :data:`ALL_OPTIONS`. The layers below collect the
sets they see themselves: the export in
:data:`~blockgz.sink.jobconfig.settings_names.EXPORT_OPTION_SETS`, the readers in
:data:`~blockgz.reader.reading.read_options.READER_OPTION_SETS`. A set missing here fails
``tests/unit/test_option_sets.py``.

>>> ALL_OPTIONS.get("flush.size").owner, ALL_OPTIONS.get("prefetch").owner
('sink', 'reader')
"""

from __future__ import annotations

from blockgz.archive.layout import KEY_OPTIONS
from blockgz.archive.reader_layout import READER_LAYOUT_OPTIONS
from blockgz.blocks.framing import FRAMING_OPTIONS
from blockgz.commits.manifests import JOB_NAME_OPTIONS
from blockgz.option_defs import OptionRegistry, OptionSet
from blockgz.reader.reading.read_options import ARCHIVE_OPTIONS
from blockgz.reader.restore.send import SEND_OPTIONS
from blockgz.reader.spark.spark_options import SPARK_READ_OPTIONS
from blockgz.registry import REGISTRY_OPTIONS
from blockgz.sink.convert.converters import CONVERTER_OPTIONS
from blockgz.sink.deadletter import DEAD_LETTER_OPTIONS
from blockgz.sink.iceberg.settings import ICEBERG_OPTIONS
from blockgz.sink.jobconfig.job_options import JOB_OPTIONS
from blockgz.sink.jobconfig.settings_names import CONNECT_OPTIONS, REFUSED_OPTIONS, WARNED_OPTIONS
from blockgz.sink.kafka.options import SOURCE_OPTIONS
from blockgz.sink.partitioning.settings import PARTITIONING_OPTIONS
from blockgz.sink.write.options import SINK_OPTIONS
from blockgz.store import TARGET_OPTIONS
from blockgz.store.settings import STORE_OPTIONS

#: Every option set, by owner: the store and the archive's layout, the Kafka source, the sink,
#: the export job (and the names it refuses, warns of or accepts), the schema registry, the
#: readers, the restore.
ALL_OPTION_SETS: tuple[OptionSet, ...] = (
    STORE_OPTIONS,
    TARGET_OPTIONS,
    KEY_OPTIONS,
    READER_LAYOUT_OPTIONS,
    FRAMING_OPTIONS,
    JOB_NAME_OPTIONS,
    SOURCE_OPTIONS,
    SINK_OPTIONS,
    PARTITIONING_OPTIONS,
    CONVERTER_OPTIONS,
    DEAD_LETTER_OPTIONS,
    ICEBERG_OPTIONS,
    JOB_OPTIONS,
    REFUSED_OPTIONS,
    WARNED_OPTIONS,
    CONNECT_OPTIONS,
    REGISTRY_OPTIONS,
    ARCHIVE_OPTIONS,
    SPARK_READ_OPTIONS,
    SEND_OPTIONS,
)
#: The lookups of :data:`ALL_OPTION_SETS`.
ALL_OPTIONS = OptionRegistry(*ALL_OPTION_SETS)

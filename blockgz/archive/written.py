"""The old name of :mod:`blockgz.written.files` (moved below the record formats, issue 43).

Kept only while an example in ``sink/export/metrics.py`` still imports it; new code imports
:mod:`blockgz.written.files` (tests/unit/test_import_graph.py lets no module import this one).
"""

from blockgz.written.files import WrittenFile, times_overlap

__all__ = ["WrittenFile", "times_overlap"]

"""The block-GZIP format: records framed into blocks, each block one gzip member, and the index.

Along the data path: :mod:`~blockgz.format.framing` (how records sit in a block) →
:mod:`~blockgz.format.writer` (cutting blocks) → :mod:`~blockgz.format.pipeline` and
:mod:`~blockgz.format.codec` (compressing them on every core) → :mod:`~blockgz.format.index`
(the ``.index.json`` sidecar). Back: :mod:`~blockgz.format.plan` (which blocks a read needs,
and the merged byte ranges that fetch them), :mod:`~blockgz.format.decode` (a block's bytes to
records) and :mod:`~blockgz.format.rebuild` (an index for any multi-member gzip). Nothing here
touches a store or a file name; :mod:`blockgz.objects` does.
"""

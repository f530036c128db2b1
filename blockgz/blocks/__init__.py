"""The block-GZIP format: records framed into blocks, each block one gzip member, and the index.

Along the data path: :mod:`~blockgz.blocks.framing` (how records sit in a block) →
:mod:`~blockgz.blocks.writer` (cutting blocks) → :mod:`~blockgz.blocks.pipeline` and
:mod:`~blockgz.blocks.codecs.gzip_members` (compressing them on every core) →
:mod:`~blockgz.blocks.index`
(the ``.index.json`` sidecar). Back: :mod:`~blockgz.blocks.plan` (which blocks a read needs,
and the merged byte ranges that fetch them), :mod:`~blockgz.blocks.decode` (a block's bytes to
records) and :mod:`~blockgz.blocks.rebuild` (an index for any multi-member gzip). Nothing here
touches a store or a file name: :mod:`blockgz.written` writes objects into a store,
:mod:`blockgz.objects` reads them back.
"""

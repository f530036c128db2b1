"""How blocks are compressed and decompressed: gzip members (ISA-L, libdeflate, zlib), zstd
frames, and one member or frame decoded out of a longer buffer."""

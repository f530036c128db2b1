"""The read side of blockgz: find the object and block holding an offset and fetch just that."""

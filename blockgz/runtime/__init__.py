"""The process around blockgz's hot paths: garbage collector, heap and C library settings."""

"""The JSON record format: one JSON value per line, Connect's JSON rendering, and the reader's
decoding of archived JSON values."""

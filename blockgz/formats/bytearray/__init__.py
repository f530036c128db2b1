"""The bytearray record format: values written as they came, one separator between them."""

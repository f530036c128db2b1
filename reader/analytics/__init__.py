"""Archived records as Arrow tables and pandas DataFrames, for analytics code."""
